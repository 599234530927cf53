"""The knowledge graph's types and rules (SPEC §2, §8): no I/O.

Entities are what records talk about; a *mention* links a record to an entity with
the record's own spelling; a *relationship* (a ``relates_to`` edge) links two entities
with a predicate, a validity range and, when a machine extracted it, a provenance.

Machine-extracted facts use a closed vocabulary, and :func:`normalise_extraction` is
the one place any provider's answer is read into it. Facts a person asserts keep
free-form labels, normalised by :func:`label` (trim + lower case).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.time import format_instant, parse_instant

ENTITY_KINDS = ("person", "organization", "project", "tool", "place", "concept", "other")
PREDICATES = (
    "works_on", "member_of", "depends_on", "uses", "owns", "part_of", "located_in", "related_to",
)  # fmt: skip
OTHER_KIND = "other"
WEAK_PREDICATE = "related_to"

#: Caps on one provider answer, so a runaway model cannot flood the graph.
MAX_ENTITIES = 64
MAX_FACTS = 128
MAX_NAME_CHARS = 200
MAX_ALIASES = 16


@dataclass(frozen=True)
class Entity:
    id: str
    name: str
    kind: str
    aliases: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "kind": self.kind, "aliases": list(self.aliases)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entity:
        return cls(data["id"], data["name"], data["kind"], tuple(data.get("aliases", ())))


@dataclass(frozen=True)
class Relationship:
    """A ``relates_to`` edge. Instants are microseconds; ``provenance`` is None when
    a person asserted it (such a fact is never closed by the extraction sweep)."""

    id: str
    subject: str
    predicate: str
    object: str
    valid_from: int
    valid_to: int | None
    confidence: float
    provenance: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "valid_from": format_instant(self.valid_from),
            "confidence": self.confidence,
        }
        if self.valid_to is not None:
            data["valid_to"] = format_instant(self.valid_to)
        if self.provenance is not None:
            data["provenance"] = self.provenance
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Relationship:
        valid_to = data.get("valid_to")
        return cls(
            id=data["id"], subject=data["subject"], predicate=data["predicate"],
            object=data["object"], valid_from=parse_instant(data["valid_from"], "valid_from"),
            valid_to=None if valid_to is None else parse_instant(valid_to, "valid_to"),
            confidence=float(data["confidence"]), provenance=data.get("provenance"),
        )  # fmt: skip


@dataclass(frozen=True)
class Mention:
    record: str
    entity: str
    spelling: str
    provenance: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "record": self.record,
            "entity": self.entity,
            "spelling": self.spelling,
        }
        if self.provenance is not None:
            data["provenance"] = self.provenance
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Mention:
        return cls(data["record"], data["entity"], data["spelling"], data.get("provenance"))


@dataclass(frozen=True)
class ExtractedEntity:
    name: str
    kind: str = OTHER_KIND
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExtractedFact:
    subject: str
    predicate: str
    object: str
    confidence: float = 1.0


@dataclass(frozen=True)
class Extraction:
    """What an extractor found in one text, already in the closed vocabulary."""

    entities: tuple[ExtractedEntity, ...] = ()
    facts: tuple[ExtractedFact, ...] = ()


NOTHING = Extraction()


def label(text: object, field_name: str) -> str:
    """A free-form label a person gave (a predicate or kind): trimmed, lower case."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{field_name} must be a non-empty string")
    return " ".join(text.split()).lower()


#: C0 and C1 control characters and DEL: never part of a name (an escape sequence in a
#: name would act on the terminal that lists it).
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def tidy_name(text: str) -> str:
    """A name with each control character taken as a space, and its spacing tidied."""
    return " ".join(_CONTROLS.sub(" ", text).split())


def entity_name(text: object, field_name: str) -> str:
    """An entity name as given, without control characters and with its spacing tidied
    (case is kept)."""
    name = tidy_name(text) if isinstance(text, str) else ""
    if not name:
        raise InvalidInput(f"{field_name} must be a non-empty string (an entity name)")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"{field_name} is {len(name)} characters; entity names are at most {MAX_NAME_CHARS}"
        )
    return name


def _vocabulary_word(value: object) -> str:
    return "_".join(str(value).strip().lower().replace("-", " ").split())


def _kind(value: object) -> str:
    word = _vocabulary_word(value) if isinstance(value, str) else ""
    return word if word in ENTITY_KINDS else OTHER_KIND


def _confidence(value: object) -> float | None:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _clean_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = tidy_name(value)
    return name[:MAX_NAME_CHARS] if name else None


def _items(raw: dict[Any, Any], name: str) -> list[Any]:
    items = raw.get(name)
    return items if isinstance(items, list) else []


def normalise_extraction(raw: object, *, min_confidence: float = 0.0) -> Extraction:
    """Reads any provider's answer into the closed vocabulary (SPEC §8).

    ``raw`` is ``{"entities": [{"name", "kind", "aliases"?}], "facts": [{"subject",
    "predicate", "object", "confidence"?}]}``. Unknown kinds become ``other``, unknown
    predicates ``related_to``; a fact whose ends are not listed entities, a self-loop,
    a non-finite confidence or one below ``min_confidence`` is dropped; sizes are
    capped. Anything malformed is skipped, never an error: a model's output is data."""
    if not isinstance(raw, dict):
        return NOTHING
    entities: dict[str, ExtractedEntity] = {}
    for item in _items(raw, "entities"):
        if len(entities) >= MAX_ENTITIES:
            break
        if not isinstance(item, dict):
            continue
        name = _clean_name(item.get("name"))
        if name is None or name in entities:
            continue
        aliases = item.get("aliases") or []
        clean = (
            [a for a in (_clean_name(x) for x in aliases) if a and a != name]
            if isinstance(aliases, list)
            else []
        )
        entities[name] = ExtractedEntity(
            name, _kind(item.get("kind")), tuple(dict.fromkeys(clean))[:MAX_ALIASES]
        )
    facts: dict[tuple[str, str, str], ExtractedFact] = {}
    for item in _items(raw, "facts"):
        if len(facts) >= MAX_FACTS:
            break
        if not isinstance(item, dict):
            continue
        subject, object_ = _clean_name(item.get("subject")), _clean_name(item.get("object"))
        if subject not in entities or object_ not in entities or subject == object_:
            continue
        assert subject is not None and object_ is not None
        confidence = _confidence(item.get("confidence"))
        if confidence is None or confidence < min_confidence:
            continue
        word = _vocabulary_word(item.get("predicate", ""))
        predicate = word if word in PREDICATES else WEAK_PREDICATE
        facts.setdefault(
            (subject, predicate, object_),
            ExtractedFact(subject, predicate, object_, min(confidence, 1.0)),
        )
    return Extraction(tuple(entities.values()), tuple(facts.values()))


def _digest(*parts: str) -> str:
    joined = "\x1f".join(parts).encode("utf-8")
    return hashlib.sha256(joined).hexdigest()[:24]


def entity_id(namespace: str, name: str, kind: str) -> str:
    """An entity's id, from where it was first seen: the same graph on every replay."""
    return "ent_" + _digest(namespace, kind, name)


def edge_id(namespace: str, evidence: str, subject: str, predicate: str, object_: str) -> str:
    """A relationship's id, from its evidence (a record and its content, or the fact an
    assertion states) and the fact: writing it twice writes it once."""
    return "rel_" + _digest(namespace, evidence, subject, predicate, object_)


@dataclass
class GraphWrite:
    """Everything one extraction (or assertion) adds, applied in one transaction."""

    entities: list[Entity] = field(default_factory=list)  # new ones
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> all aliases
    kinds: dict[str, str] = field(default_factory=dict)  # id -> kind, for "other" ones
    same_as: list[tuple[str, str]] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    edges: list[Relationship] = field(default_factory=list)


# -- the graph as a backup holds it (erstwhile export, format 2) ------------------------


@dataclass(frozen=True)
class RecordedEntity:
    """An entity with the instant it was first recorded."""

    entity: Entity
    created_at: int


@dataclass(frozen=True)
class RecordedMention:
    """A mention with its record-time range: ``known_to`` None while it is current,
    else the instant a re-extraction retracted it."""

    mention: Mention
    known_from: int
    known_to: int | None = None


@dataclass(frozen=True)
class RecordedEdge:
    """One version of an edge with its record-time range: ``known_to`` None for the
    version current now, else the instant a retraction or a sweep replaced it."""

    edge: Relationship
    known_from: int
    known_to: int | None = None


@dataclass(frozen=True)
class Marker:
    """That the extract job read ``record`` (with the content whose hash it keeps)."""

    record: str
    extractor: str
    at: int
    content_hash: str | None


@dataclass
class GraphRows:
    """Everything the graph of one namespace holds, in the export's order (byte order
    of ids, versions by record time). ``told``: only what people told it (rows with no
    provenance, every entity and ``possibly_same_as`` link), no extraction markers."""

    entities: list[RecordedEntity] = field(default_factory=list)
    same_as: list[tuple[str, str]] = field(default_factory=list)
    mentions: list[RecordedMention] = field(default_factory=list)
    edges: list[RecordedEdge] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)

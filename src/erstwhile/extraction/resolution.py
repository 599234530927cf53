"""Entity resolution (SPEC §8): which known entity a name is, if any. It prefers a
missed merge to a wrong one.

A name converges on a known entity when it differs from the entity's name (or one of
its recorded aliases) only in case, punctuation or spacing; when one of the aliases it
comes with is exactly such a spelling of one known entity; or when it is a one-character
typo (one insertion, deletion or substitution) inside one word of eight or more
characters and no other entity is that close. Even then a typo never merges:

- names whose numbers differ (``Windows 10`` / ``Windows 11``, ``Python 3.11`` /
  ``Python 31.1``): they are different things, and nothing links them;
- a person's given name (``Mario Garcia`` / ``Maria Garcia``, ``Michael`` / ``Michel``):
  a typo of a surname of eight or more letters may merge, a differing given name is
  only linked by ``possibly_same_as``, as is a typo in a word shorter than eight.

A name close to several entities is ambiguous: it becomes an entity of its own, linked
to each by ``possibly_same_as``. So is a name spelled like an entity of another kind
(``Mercury`` the tool is not ``Mercury`` the place), except that ``other`` — "could not
classify" — fits any kind. A name that resolves to one entity while an alias it comes
with is the spelling of another is linked to that other. Resolution never merges,
renames or deletes an entity; the record keeps its own spelling on the mention.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from erstwhile.domain.graph import (
    MAX_ALIASES,
    OTHER_KIND,
    Entity,
    Extraction,
    GraphWrite,
    Mention,
    Relationship,
    edge_id,
    entity_id,
)

#: The shortest word a one-character typo may merge inside: in shorter words one edit
#: is as likely another word (Mario/Maria, Pandas/Panda, Google/Goggle) as a slip.
TYPO_MIN_CHARS = 8
PERSON_KIND = "person"
#: Kept by the fold: in names like C++ and C# they are not decoration.
_SIGNIFICANT = frozenset("+#")
_TOKEN = re.compile(r"[^\W_]+|[+#]+")
_NUMBER = re.compile(r"\d+")
_BETWEEN_DIGITS = re.compile(r"(?<=\d)(?:[^\w+#]|_)+(?=\d)")
_KEPT_SEPARATOR = "\x1f"


def fold(name: str) -> str:
    """A name without case, spacing or punctuation: the form variants share. A
    separator between two digits stays (as ``.``): ``3.11`` is not ``31.1``."""
    marked = _BETWEEN_DIGITS.sub(_KEPT_SEPARATOR, name.casefold())
    kept = (ch for ch in marked if ch.isalnum() or ch in _SIGNIFICANT or ch == _KEPT_SEPARATOR)
    return "".join(kept).replace(_KEPT_SEPARATOR, ".")


def words(name: str) -> tuple[str, ...]:
    """A name's words, case folded: runs of letters and digits (and of ``+``/``#``)."""
    return tuple(_TOKEN.findall(name.casefold()))


def numbers(name: str) -> tuple[str, ...]:
    return tuple(_NUMBER.findall(fold(name).replace(".", " ")))


def one_edit_apart(a: str, b: str) -> bool:
    """Exactly one insertion, deletion or substitution turns ``a`` into ``b``."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return a[i + 1 :] == b[i + 1 :]
    return a[i:] == b[i + 1 :]


def typo(a: str, b: str, *, person: bool) -> bool | None:
    """Whether spelling ``b`` may be a typo of ``a`` to merge on (True), only to link
    (False), or not at all (None). Their folds are one edit apart."""
    if numbers(a) != numbers(b):
        return None  # another version, model, year, route: never the same thing
    wa, wb = words(a), words(b)
    if len(wa) != len(wb):
        return False  # the edit joins or splits words: too unlike a slip to merge
    differing = [i for i, (x, y) in enumerate(zip(wa, wb, strict=True)) if x != y]
    if len(differing) != 1:
        return False
    (i,) = differing
    if min(len(wa[i]), len(wb[i])) < TYPO_MIN_CHARS:
        return False
    # a person's given name (a lone person name is one) that differs: only linked
    return not (person and (len(wa) == 1 or i < len(wa) - 1))


def _deletions(key: str) -> set[str]:
    return {key[:i] + key[i + 1 :] for i in range(len(key))}


def compatible(a: str, b: str) -> bool:
    return a == b or OTHER_KIND in (a, b)


@dataclass(frozen=True)
class Resolution:
    """Where a name landed: ``entity`` is the id to mention; ``created`` the new entity
    when there was none; ``same_as`` the entities it may be; ``kind`` a kind for an
    entity known only as ``other``; ``alias`` true when it converged through one of
    its aliases (the name is then a new alias of that entity)."""

    entity: str
    created: Entity | None = None
    same_as: tuple[str, ...] = ()
    kind: str | None = None
    alias: bool = False


class Resolver:
    """The known entities of one namespace, indexed for resolution. Entities added
    (``learn``) are found by the next name, as they would be after a commit."""

    def __init__(self, namespace: str, known: list[Entity] | None = None) -> None:
        self.namespace = namespace
        self._entities: dict[str, Entity] = {}
        self._exact: dict[str, list[str]] = defaultdict(list)
        # key -> the spellings (entity id, spelling) folded to it
        self._spellings: dict[str, list[tuple[str, str]]] = defaultdict(list)
        # every key of eight or more characters under itself and each of its one-
        # character deletions: two keys one edit apart share one of these
        self._near: dict[str, set[str]] = defaultdict(set)
        for entity in known or []:
            self.learn(entity)

    def learn(self, entity: Entity) -> None:
        """Adds (or refreshes, after an alias or kind change) a known entity."""
        self._entities[entity.id] = entity
        for spelling in (entity.name, *entity.aliases):
            key = fold(spelling)
            if entity.id not in self._exact[key]:
                self._exact[key].append(entity.id)
            if (entity.id, spelling) not in self._spellings[key]:
                self._spellings[key].append((entity.id, spelling))
            if len(key) >= TYPO_MIN_CHARS:
                for near in (key, *_deletions(key)):
                    self._near[near].add(key)

    def get(self, entity_id_: str) -> Entity:
        return self._entities[entity_id_]

    def add_aliases(self, entity_id_: str, aliases: tuple[str, ...]) -> tuple[str, ...] | None:
        """Records spellings an entity is also known by; its new alias list, or None
        when nothing was new."""
        entity = self._entities[entity_id_]
        known = (entity.name, *entity.aliases)
        new = [a for a in aliases if a not in known]
        if not new:
            return None
        merged = (*entity.aliases, *dict.fromkeys(new))[:MAX_ALIASES]
        if merged == entity.aliases:
            return None
        self.learn(replace(entity, aliases=merged))
        return merged

    def spelled(self, name: str, kind: str) -> list[str]:
        """The known entities of a fitting kind that ``name`` is a spelling of."""
        key = fold(name) or name.casefold()
        return [i for i in self._exact.get(key, []) if compatible(self._entities[i].kind, kind)]

    def resolve(self, name: str, kind: str, aliases: tuple[str, ...] = ()) -> Resolution:
        key = fold(name) or name.casefold()
        same_key = [self._entities[i] for i in self._exact.get(key, [])]
        fits = [e for e in same_key if compatible(e.kind, kind)]
        if fits:
            # the lowest id, not the first seen: the same choice whatever order they came in
            same_kind = [e for e in fits if e.kind == kind]
            return self._converge(min(same_kind or fits, key=lambda e: e.id), kind)
        if same_key:  # spelled like entities of other kinds: may be them, may not
            return self._new(name, kind, [e.id for e in same_key])
        by_alias = sorted({i for alias in aliases for i in self.spelled(alias, kind)})
        if len(by_alias) == 1:  # it says it is also called what a known entity is called
            return replace(self._converge(self._entities[by_alias[0]], kind), alias=True)
        if by_alias:
            return self._new(name, kind, by_alias)
        merge, link = self._typo_candidates(name, key, kind)
        if len(merge) == 1 and not link:
            return self._converge(self._entities[merge[0]], kind)
        return self._new(name, kind, merge + link)

    def _converge(self, chosen: Entity, kind: str) -> Resolution:
        if chosen.kind == OTHER_KIND and kind != OTHER_KIND:
            # first evidence of what an unclassified entity is: it is now that kind
            self._entities[chosen.id] = replace(chosen, kind=kind)
            return Resolution(chosen.id, kind=kind)
        return Resolution(chosen.id)

    def _typo_candidates(self, name: str, key: str, kind: str) -> tuple[list[str], list[str]]:
        """The entities ``name`` may be a typo of: those it may merge on, and those it
        is only linked to."""
        keys: set[str] = set()
        for near in (key, *_deletions(key)):
            keys |= self._near.get(near, set())
        merge: list[str] = []
        link: list[str] = []
        for known in sorted(keys):
            if not one_edit_apart(key, known):
                continue
            for candidate, spelling in self._spellings[known]:
                other = self._entities[candidate]
                if not compatible(other.kind, kind) or candidate in merge:
                    continue
                verdict = typo(spelling, name, person=PERSON_KIND in (kind, other.kind))
                if verdict:
                    merge.append(candidate)
                    if candidate in link:
                        link.remove(candidate)
                elif verdict is False and candidate not in link:
                    link.append(candidate)
        return merge, link

    def _new(self, name: str, kind: str, same_as: list[str]) -> Resolution:
        entity = Entity(entity_id(self.namespace, name, kind), name, kind)
        self.learn(entity)
        return Resolution(entity.id, created=entity, same_as=tuple(sorted(set(same_as))))


def plan(
    resolver: Resolver,
    extraction: Extraction,
    *,
    record_id: str | None,
    evidence: str,
    valid_from: int,
    provenance: dict[str, Any] | None,
) -> GraphWrite:
    """What ``extraction`` adds to the graph once its names are resolved: new
    entities, kinds learnt, ``possibly_same_as`` links, the record's mentions (each
    with the record's own spelling) and one edge per fact, its id derived from
    ``evidence`` and the fact. Self-loops that appear only after resolution (two
    spellings of one entity) are dropped."""
    change = GraphWrite()
    ids: dict[str, str] = {}
    for found in extraction.entities:
        resolution = resolver.resolve(found.name, found.kind, found.aliases)
        ids[found.name] = resolution.entity
        if resolution.created is not None:
            change.entities.append(resolution.created)
        if resolution.kind is not None:
            change.kinds[resolution.entity] = resolution.kind
        # an alias that is another entity's spelling: may be the same one, never merged
        named = {i for alias in found.aliases for i in resolver.spelled(alias, found.kind)}
        others = sorted((set(resolution.same_as) | named) - {resolution.entity})
        change.same_as += [(resolution.entity, other) for other in others]
        spellings = (found.name, *found.aliases) if resolution.alias else found.aliases
        aliases = resolver.add_aliases(resolution.entity, spellings)
        if aliases is not None:
            change.aliases[resolution.entity] = aliases
        if record_id is not None:
            change.mentions.append(Mention(record_id, resolution.entity, found.name, provenance))
    for fact in extraction.facts:
        subject, object_ = ids[fact.subject], ids[fact.object]
        if subject == object_:
            continue
        change.edges.append(
            Relationship(
                id=edge_id(resolver.namespace, evidence, subject, fact.predicate, object_),
                subject=subject, predicate=fact.predicate, object=object_,
                valid_from=valid_from, valid_to=None, confidence=fact.confidence,
                provenance=provenance,
            )
        )  # fmt: skip
    return change

"""Entity resolution (SPEC §8): which known entity a name is, if any.

A name converges on a known entity when it differs from the entity's name (or one of
its recorded aliases) only in case, punctuation or spacing, or when it is a one-
character typo (one insertion, deletion or substitution) of a name of six or more
characters and no other entity is that close. A name close to several entities is
ambiguous: it becomes an entity of its own, linked to each by ``possibly_same_as``.
So is a name spelled like an entity of another kind (``Mercury`` the tool is not
``Mercury`` the place), except that ``other`` — "could not classify" — fits any kind.
Resolution never merges, renames or deletes an entity.
"""

from __future__ import annotations

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

TYPO_MIN_CHARS = 6
#: Kept by the fold: in names like C++ and C# they are not decoration.
_SIGNIFICANT = frozenset("+#")


def fold(name: str) -> str:
    """A name without case, spacing or punctuation: the form variants share."""
    return "".join(ch for ch in name.casefold() if ch.isalnum() or ch in _SIGNIFICANT)


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


def _deletions(key: str) -> set[str]:
    return {key[:i] + key[i + 1 :] for i in range(len(key))}


def compatible(a: str, b: str) -> bool:
    return a == b or OTHER_KIND in (a, b)


@dataclass(frozen=True)
class Resolution:
    """Where a name landed: ``entity`` is the id to mention; ``created`` the new entity
    when there was none; ``same_as`` the entities it may be; ``kind`` a kind for an
    entity known only as ``other``."""

    entity: str
    created: Entity | None = None
    same_as: tuple[str, ...] = ()
    kind: str | None = None


class Resolver:
    """The known entities of one namespace, indexed for resolution. Entities added
    (``learn``) are found by the next name, as they would be after a commit."""

    def __init__(self, namespace: str, known: list[Entity] | None = None) -> None:
        self.namespace = namespace
        self._entities: dict[str, Entity] = {}
        self._exact: dict[str, list[str]] = defaultdict(list)
        # every key of six or more characters under itself and each of its one-
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

    def resolve(self, name: str, kind: str) -> Resolution:
        key = fold(name) or name.casefold()
        same_key = [self._entities[i] for i in self._exact.get(key, [])]
        fits = [e for e in same_key if compatible(e.kind, kind)]
        if fits:
            # the lowest id, not the first seen: the same choice whatever order they came in
            same_kind = [e for e in fits if e.kind == kind]
            return self._converge(min(same_kind or fits, key=lambda e: e.id), kind)
        if same_key:  # spelled like entities of other kinds: may be them, may not
            return self._new(name, kind, [e.id for e in same_key])
        close = self._typo_candidates(key, kind)
        if len(close) == 1:
            return self._converge(self._entities[close[0]], kind)
        return self._new(name, kind, close)

    def _converge(self, chosen: Entity, kind: str) -> Resolution:
        if chosen.kind == OTHER_KIND and kind != OTHER_KIND:
            # first evidence of what an unclassified entity is: it is now that kind
            self._entities[chosen.id] = replace(chosen, kind=kind)
            return Resolution(chosen.id, kind=kind)
        return Resolution(chosen.id)

    def _typo_candidates(self, key: str, kind: str) -> list[str]:
        keys: set[str] = set()
        for near in (key, *_deletions(key)):
            keys |= self._near.get(near, set())
        found: list[str] = []
        for known in sorted(keys):
            if len(known) < TYPO_MIN_CHARS or not one_edit_apart(key, known):
                continue
            for candidate in self._exact[known]:
                if compatible(self._entities[candidate].kind, kind) and candidate not in found:
                    found.append(candidate)
        return found

    def _new(self, name: str, kind: str, same_as: list[str]) -> Resolution:
        entity = Entity(entity_id(self.namespace, name, kind), name, kind)
        self.learn(entity)
        return Resolution(entity.id, created=entity, same_as=tuple(sorted(same_as)))


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
        resolution = resolver.resolve(found.name, found.kind)
        ids[found.name] = resolution.entity
        if resolution.created is not None:
            change.entities.append(resolution.created)
        if resolution.kind is not None:
            change.kinds[resolution.entity] = resolution.kind
        change.same_as += [(resolution.entity, other) for other in resolution.same_as]
        aliases = resolver.add_aliases(resolution.entity, found.aliases)
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

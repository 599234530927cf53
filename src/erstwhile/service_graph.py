"""The service's knowledge-graph half: asserted facts and mentions, reading the graph,
the extract job and search expansion. :class:`~erstwhile.service.Service` inherits it,
so every interface still calls one façade."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.graph import (
    OTHER_KIND,
    Entity,
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    Mention,
    Relationship,
    entity_name,
    label,
)
from erstwhile.domain.records import validate_namespace, validate_record_id
from erstwhile.domain.search import Expand, Hit, SearchRequest
from erstwhile.domain.time import Window
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.resolution import Resolver, plan
from erstwhile.extraction.usage import Budget
from erstwhile.jobs.embed import NamespaceLocks, Progress
from erstwhile.jobs.extract import ExtractReport, run_extract_job
from erstwhile.jobs.rows import JobThreads
from erstwhile.store.base import Store

MAX_ENTITY_LIST = 1000
NameLike = str | Mapping[str, Any]


def _named(value: NameLike, field: str) -> ExtractedEntity:
    """A name a person gave, with an optional free-form kind and aliases."""
    if isinstance(value, str):
        return ExtractedEntity(entity_name(value, field), OTHER_KIND)
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{field} must be a name or an object with a name")
    unknown = set(value) - {"name", "kind", "aliases"}
    if unknown:
        raise InvalidInput(f"{field} has unknown fields {sorted(unknown)}; use name, kind, aliases")
    kind = value.get("kind")
    aliases = value.get("aliases") or []
    if not isinstance(aliases, list):
        raise InvalidInput(f"{field}.aliases must be a list of names")
    return ExtractedEntity(
        entity_name(value.get("name"), f"{field}.name"),
        OTHER_KIND if kind is None else label(kind, f"{field}.kind"),
        tuple(entity_name(a, f"{field}.aliases[{i}]") for i, a in enumerate(aliases)),
    )


class GraphMethods:
    """Mixed into Service; relies on its ``store``, ``policy`` and background queue."""

    store: Store
    clock: Callable[[], int]
    extractor: Extractor | None
    min_confidence: float
    budget: Budget
    _extract_locks: NamespaceLocks
    _jobs: JobThreads
    # asserted writes resolve against the graph, then write: one at a time per namespace
    _assert_lock: threading.Lock

    # -- asserted facts and mentions ------------------------------------------------

    def _resolver(self, namespace: str) -> Resolver:
        return Resolver(namespace, self.store.graph.known(namespace))

    def assert_fact(
        self,
        namespace: str,
        subject: NameLike,
        predicate: str,
        object: NameLike,
        valid_from: int | None = None,
    ) -> Relationship:
        """Records a fact a person states. Its predicate is free-form (trimmed, lower
        case); it has no provenance, so the extraction sweep never closes it. Stating
        the same fact from the same instant twice records it once."""
        validate_namespace(namespace)
        now = self.clock()
        start = now if valid_from is None else valid_from
        ends = (_named(subject, "subject"), _named(object, "object"))
        if ends[0].name == ends[1].name:
            raise InvalidInput("subject and object name the same entity; a fact links two")
        facts = (ExtractedFact(ends[0].name, label(predicate, "predicate"), ends[1].name),)
        with self._assert_lock:
            resolver = self._resolver(namespace)
            change = plan(
                resolver, Extraction(ends, facts), record_id=None,
                evidence=f"asserted\x1f{start}", valid_from=start, provenance=None,
            )  # fmt: skip
            if not change.edges:
                raise InvalidInput(
                    "subject and object resolve to the same entity; a fact links two"
                )
            self.store.graph.apply(namespace, change, now=now)
        return change.edges[0]

    def mention(
        self, namespace: str, record_id: str, entities: Sequence[NameLike]
    ) -> list[Mention]:
        """Records that a record mentions these entities (resolved like extracted
        names; kinds are free-form labels). Returns the mentions, one per entity."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        if isinstance(entities, str | Mapping) or not entities:
            raise InvalidInput("entities must be a non-empty list of names or {name, kind}")
        named = [_named(e, f"entities[{i}]") for i, e in enumerate(entities)]
        self.store.get(namespace, record_id)  # NotFound for an unknown or hard-deleted id
        with self._assert_lock:
            change = plan(
                self._resolver(namespace), Extraction(tuple(named)), record_id=record_id,
                evidence="", valid_from=0, provenance=None,
            )  # fmt: skip
            self.store.graph.apply(namespace, change, now=self.clock())
        return change.mentions

    # -- reading the graph ----------------------------------------------------------

    def entities(
        self,
        namespace: str,
        q: str | None = None,
        *,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[Entity]:
        validate_namespace(namespace)
        if not 1 <= limit <= MAX_ENTITY_LIST:
            raise InvalidInput(f"limit must be between 1 and {MAX_ENTITY_LIST}, got {limit}")
        kind = None if kind is None else label(kind, "kind")
        return self.store.graph.entities(namespace, q=q or None, kind=kind, limit=limit)

    def entity(self, namespace: str, entity_id: str) -> dict[str, Any]:
        """One entity with what it may be the same as."""
        validate_namespace(namespace)
        found = self.store.graph.entity(namespace, entity_id)
        return {
            **found.to_json(),
            "possibly_same_as": self.store.graph.same_as(namespace, entity_id),
        }

    def relationships(
        self,
        namespace: str,
        entity_id: str,
        *,
        include_expired: bool = False,
        as_of: int | None = None,
    ) -> list[Relationship]:
        """An entity's edges valid now (or at ``as_of``); with ``include_expired``
        every edge it ever had, retracted ones too."""
        validate_namespace(namespace)
        if include_expired and as_of is not None:
            raise InvalidInput("include_expired and as_of are mutually exclusive; choose one")
        self.store.graph.entity(namespace, entity_id)
        window = None if include_expired else Window.point(self.clock() if as_of is None else as_of)
        return self.store.graph.relationships(namespace, entity_id, window)

    def mentions(self, namespace: str, entity_id: str) -> list[Mention]:
        validate_namespace(namespace)
        self.store.graph.entity(namespace, entity_id)
        return self.store.graph.mentions(namespace, entity_id)

    # -- the extract job --------------------------------------------------------------

    def extract(
        self, namespace: str, *, progress: Progress | None = None, budget: Budget | None = None
    ) -> ExtractReport:
        """Reads the namespace's extraction backlog into the graph now (and sweeps),
        within ``budget`` (its unset limits: the configured ones)."""
        validate_namespace(namespace)
        extractor = self._require_extractor(namespace)
        return run_extract_job(
            self.store, namespace, extractor, min_confidence=self.min_confidence,
            progress=progress, clock=self.clock, lock=self._extract_locks(namespace),
            stop=self._jobs.stop, budget=(budget or Budget()).or_else(self.budget),
        )  # fmt: skip

    def _require_extractor(self, namespace: str) -> Extractor:
        if self.extractor is None:
            raise InvalidInput(
                f"extraction is off, so namespace {namespace!r} has nothing to extract with: "
                "set [extraction] provider (heuristic, command or http), --extractor or "
                "erstwhile.open(..., extractor=...)"
            )
        return self.extractor

    def extraction_backlog(self, namespace: str) -> int:
        return self.store.graph.backlog_count(namespace, self.clock())

    def describe_extractor(self) -> str:
        return self.extractor.extractor_id if self.extractor is not None else "none"

    # -- expansion ------------------------------------------------------------------

    def _expand(
        self, namespace: str, request: SearchRequest, window: Window | None, hits: list[Hit]
    ) -> list[Hit]:
        """The direct hits, then what the graph connects them to (SPEC §6)."""
        spec = request.expand if isinstance(request.expand, Expand) else Expand()
        if not hits:
            return hits
        reached = self.store.graph.expand(
            namespace, request, window, [hit.record.id for hit in hits],
            hops=spec.hops, limit=spec.limit,
        )  # fmt: skip
        names: dict[str, str] = {}

        def named(via: dict[str, str]) -> dict[str, str]:
            """The path with its entity's name beside its id (the id links to the
            entity's page; the name is what a reader recognises)."""
            entity = via["entity"]
            if entity not in names:
                names[entity] = self.store.graph.entity(namespace, entity).name
            return {"entity": entity, "name": names[entity],
                    **{k: v for k, v in via.items() if k != "entity"}}  # fmt: skip

        return hits + [
            Hit(record=r.record, score=0.0, signals={"graph": {"hops": r.hops, "from": r.origin}},
                via=[named(via) for via in r.via])
            for r in reached
        ]  # fmt: skip

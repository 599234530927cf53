"""The embedded Python API: ``erstwhile.open(path)`` returns a :class:`Memory`.

This is the Python adapter: it accepts dicts or domain objects and keyword options,
converts them once into domain requests, and calls the service.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import platformdirs

from erstwhile import store
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.graph import Entity, Mention, Relationship
from erstwhile.domain.ledger import ChangesPage
from erstwhile.domain.records import Record, RecordInput, UpsertResult, plain_record
from erstwhile.domain.search import ExpireRequest, SearchRequest, SearchResult
from erstwhile.domain.time import parse_instant
from erstwhile.domain.validation import parse_model
from erstwhile.domain.vectors import unit_rows
from erstwhile.embedding.binding import EmbedderBinding, EmbedderSpec, build_embedder
from erstwhile.extraction.registry import ExtractorSpec, build_budget, build_extractor
from erstwhile.extraction.usage import Budget
from erstwhile.gc_pause import gc_paused
from erstwhile.jobs import job_json
from erstwhile.jobs.batches import DEFAULT_BATCH_SIZE
from erstwhile.jobs.embed import JobReport, Progress
from erstwhile.jobs.extract import ExtractReport
from erstwhile.jobs.files import shown, storable
from erstwhile.jobs.folder import DEFAULT_MAX_BYTES
from erstwhile.jobs.mining import MineReport, MineRequest
from erstwhile.rerank import RerankerSpec, build_reranker
from erstwhile.service import DEFAULT_CHANGES, Policy, Service
from erstwhile.service_graph import NameLike
from erstwhile.store import StorageOptions

RecordLike = Record | Mapping[str, Any]

# the server config file's variable (erstwhile.config); here, so the CLI can name it
# without importing the config module
CONFIG_ENV = "ERSTWHILE_CONFIG"
# the most worker processes `erstwhile serve --workers` runs (erstwhile.config)
MAX_WORKERS = 64


def default_path() -> Path:
    """The default database file, in the user's data directory."""
    return Path(platformdirs.user_data_dir("erstwhile")) / "erstwhile.db"


def resolve_target(target: str | os.PathLike[str] | None) -> str:
    """A PostgreSQL URL as given, or a filesystem path for SQLite from a path, a
    ``sqlite:///`` URL or nothing (``ERSTWHILE_DB``, else the user data file)."""
    if target is None:
        target = os.environ.get("ERSTWHILE_DB") or default_path()
    return store.resolve_target(target)


def _instant(value: Any, field: str) -> int | None:
    return None if value is None else parse_instant(value, field)


def to_record(data: RecordLike, field: str) -> Record:
    if isinstance(data, Record):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{field} must be a record or a mapping, got {type(data).__name__}")
    return parse_model(RecordInput, dict(data), field)


def with_vectors(
    given: Sequence[RecordLike],
) -> tuple[list[Record], np.ndarray] | tuple[None, None]:
    """A batch of mappings that each carry a vector (a list of numbers), parsed with
    the vectors checked together (:func:`unit_rows`: one conversion for the batch)
    instead of number by number in each record's validation, and their unit rows;
    each record of the plain shape built by :func:`plain_record`, any other one
    validated. ``(None, None)`` when the batch is not such, or any of its vectors
    fails a check: it is then parsed record by record, which names the first bad
    field exactly as ever."""
    vectors: list[list[float] | np.ndarray] = []
    for data in given:
        vector = data.get("vector") if isinstance(data, Mapping) else None
        if type(vector) is not list and not isinstance(vector, np.ndarray):
            return None, None
        vectors.append(vector)
    # unit_rows takes what the validator takes as a float (ints, bools, numbers with
    # __float__; arrays of real numbers) at the value it would give, and refuses the
    # rest (text, None)
    units = unit_rows(vectors)
    if units is None:
        return None, None
    parsed: list[Record] = []
    for i, (data, vector) in enumerate(zip(given, vectors, strict=True)):
        fields = data if type(data) is dict else dict(cast(Mapping[str, Any], data))
        record = plain_record(fields, vector)  # type: ignore[arg-type]
        if record is None:
            fields = dict(fields)
            del fields["vector"]
            record = parse_model(RecordInput, fields, f"records[{i}]")
            # checked by unit_rows, which the store takes it from; an array stays one
            # (the record's vector is only the sign that it came with one from here)
            record.vector = vector  # type: ignore[assignment]
        parsed.append(record)
    return parsed, units


def expire_request(
    filter: Mapping[str, Any] | None,
    predicates: list[Any] | None,
    action: str,
    max_rows: int | None,
    **scope: Any,
) -> ExpireRequest:
    """The keyword form of ``expire`` (shared by ``Memory`` and ``Client``) as a request;
    ``scope`` holds ``kind``, ``tags``, ``key`` and ``all`` where given."""
    fields = {name: value for name, value in scope.items() if value is not None}
    return parse_model(
        ExpireRequest,
        {
            **fields,
            "filter": dict(filter or {}),
            "predicates": predicates or [],
            "action": action,
            "max_rows": max_rows,
        },
    )


class Memory:
    """A memory store opened in this process. Thread-safe; several processes may
    open the same file."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.service.close()

    def upsert(self, namespace: str, records: Iterable[RecordLike] | RecordLike) -> UpsertResult:
        """Writes ``records`` (dicts or :class:`Record`) as one all-or-nothing batch.
        A dict's ``vector`` may be a list of numbers or a one-dimensional NumPy array of
        them (taken as is); a batch whose every record carries one has its vectors
        checked together, and records of the plain shape are built without the
        validator (the same records; a bad field is named as ever)."""
        if isinstance(records, Record | Mapping):
            records = [records]
        given = list(records)
        with gc_paused():  # a batch of short-lived objects, none cyclic
            parsed, units = with_vectors(given)
            if parsed is None:
                parsed = [to_record(r, f"records[{i}]") for i, r in enumerate(given)]
            result = self.service.upsert(namespace, parsed, units=units)
            # freed while the collector is still off: it then never walks (nor keeps)
            # the batch's records (a fifth less time collecting over an ingest)
            del parsed, units
        return result

    def add(self, namespace: str, content: str, **fields: Any) -> str:
        """Stores one record and returns its id."""
        return self.upsert(namespace, [{"content": content, **fields}]).ids[0]

    def search(self, namespace: str, query: str | None = None, **options: Any) -> SearchResult:
        if query is not None:
            options["query"] = query
        return self.service.search(namespace, parse_model(SearchRequest, options))

    def get(
        self,
        namespace: str,
        id: str,
        version: int | None = None,
        known_at: Any = None,
        *,
        min_trust: str | None = None,
    ) -> Record:
        """The current record, one of its versions, or (``known_at``, an instant) its
        version as erstwhile knew it then. A record below the trust view (``min_trust``:
        ``"verified"`` or ``"unverified"``, else the namespace's default view) is not
        found."""
        return self.service.get(
            namespace, id, version, _instant(known_at, "known_at"),
            min_trust=min_trust,
        )  # fmt: skip

    def history(
        self,
        namespace: str,
        id: str,
        known_at: Any = None,
        *,
        versions: bool = False,
        min_trust: str | None = None,
    ) -> list[Record]:
        """The supersession chain through ``id``, oldest first; as known at ``known_at``
        when given. Each record carries its record-time range, ``updated_at`` until
        ``known_until`` (None while current). ``versions=True`` lists every stored
        version of each record of the chain instead, in-place rewrites too, oldest
        first in record time. Versions below the trust view (``min_trust``, else the
        namespace's default view) are left out."""
        return self.service.history(
            namespace, id, _instant(known_at, "known_at"), versions=versions,
            min_trust=min_trust,
        )  # fmt: skip

    def audit(self, namespace: str) -> dict[str, Any]:
        """A namespace's embedder, vector backlog, record counts (current, future,
        superseded, invalidated, deleted), extractor, extraction backlog and latest jobs: what
        ``GET /v1/namespaces/{ns}/audit`` answers and ``erstwhile audit`` shows."""
        found = self.service.audit(namespace)
        return {**found, "jobs": [job_json(job) for job in found["jobs"]]}

    def changes(
        self,
        namespace: str,
        since: Any,
        until: Any = None,
        *,
        after: int | None = None,
        limit: int = DEFAULT_CHANGES,
    ) -> ChangesPage:
        """What was recorded in record time ``[since, until)`` (until now by default):
        a page of changes, oldest first; pass ``page.next`` as ``after`` for the next."""
        return self.service.changes(
            namespace, parse_instant(since, "since"), _instant(until, "until"),
            after=after, limit=limit,
        )  # fmt: skip

    def supersede(self, namespace: str, old_id: str, record: RecordLike) -> UpsertResult:
        return self.service.supersede(namespace, old_id, to_record(record, "record"))

    def invalidate(self, namespace: str, id: str, at: Any = None) -> int:
        return self.service.invalidate(
            namespace, id, None if at is None else parse_instant(at, "at")
        )

    def delete(self, namespace: str, id: str, hard: bool = False) -> None:
        self.service.delete(namespace, id, hard=hard)

    def expire(
        self,
        namespace: str,
        filter: Mapping[str, Any] | None = None,
        predicates: list[Any] | None = None,
        action: str = "invalidate",
        max_rows: int | None = None,
        *,
        kind: str | None = None,
        tags: list[str] | None = None,
        key: str | None = None,
        all: bool = False,
    ) -> int:
        """Applies ``action`` to at most ``max_rows`` records in scope (the search's
        scope options); with no scope at all, only when ``all=True``."""
        request = expire_request(
            filter, predicates, action, max_rows, kind=kind, tags=tags, key=key, all=all
        )
        return self.service.expire(namespace, request)

    def verify(self, namespace: str, id: str, reviewer: str) -> int:
        return self.service.verify(namespace, id, reviewer)

    def set_embedding(self, namespace: str, id: str, vector: list[float]) -> None:
        self.service.set_embedding(namespace, id, list(vector))

    def embed(self, namespace: str, *, progress: Progress | None = None) -> JobReport:
        """Embeds every record of the namespace that has no vector yet, now."""
        return self.service.embed(namespace, progress=progress)

    def reindex(self, namespace: str, *, progress: Progress | None = None) -> JobReport:
        """Re-embeds the whole namespace with its current embedder."""
        return self.service.embed(namespace, progress=progress, reindex=True)

    def mine(
        self,
        namespace: str,
        path: str | os.PathLike[str],
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        source: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        progress: Progress | None = None,
    ) -> MineReport:
        """Files the folder's Markdown, text and code as records, one per chunk, each
        with an ``origin``; mined again, keeps them in step with the folder: an unchanged
        chunk writes nothing, an edited one supersedes its predecessor, a vanished one is
        invalidated. ``include``/``exclude`` are gitignore-style patterns; the folder's
        ``.gitignore`` files are honoured. ``source`` names the folder in ``origin``
        (default: its absolute path). ``progress(documents done, documents)``."""
        if not storable(os.fspath(path)):
            raise InvalidInput(
                f"path '{shown(os.fspath(path))}' is not UTF-8, which a mine request cannot "
                "carry; rename the folder, or mine it through a link whose name is UTF-8, "
                "naming the source with --source NAME"
            )
        request = parse_model(
            MineRequest,
            {"path": os.fspath(path), "include": list(include), "exclude": list(exclude),
             "source": source, "batch_size": batch_size, "max_bytes": max_bytes},
        )  # fmt: skip
        return self.service.mine(namespace, request, progress=progress)

    def embedder_id(self, namespace: str) -> str:
        """The active embedder of a namespace (``provider:model:dimensions``) or "none"."""
        return self.service.embedders.describe(namespace)

    # -- the knowledge graph ------------------------------------------------------

    def extract(
        self,
        namespace: str,
        *,
        progress: Progress | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
    ) -> ExtractReport:
        """Reads the namespace's notes and mined records into the graph now, within a
        budget: ``max_calls`` provider calls and ``max_tokens`` tokens (each unset: the
        extractor config's, else none). A job that reaches one stops cleanly, its
        report's ``stopped`` saying why; the next one carries on."""
        budget = parse_model(Budget, {"max_calls": max_calls, "max_tokens": max_tokens})
        return self.service.extract(namespace, progress=progress, budget=budget)

    def assert_fact(
        self,
        namespace: str,
        subject: NameLike,
        predicate: str,
        object: NameLike,
        valid_from: Any = None,
    ) -> Relationship:
        """Records a fact a person states: ``subject`` ``predicate`` ``object`` (names,
        or ``{"name", "kind"}``), valid from ``valid_from`` (default now)."""
        start = None if valid_from is None else parse_instant(valid_from, "valid_from")
        return self.service.assert_fact(namespace, subject, predicate, object, start)

    def mention(self, namespace: str, record_id: str, entities: list[NameLike]) -> list[Mention]:
        """Records that a record mentions these entities (names or ``{"name", "kind"}``)."""
        return self.service.mention(namespace, record_id, entities)

    def entities(
        self, namespace: str, q: str | None = None, *, kind: str | None = None, limit: int = 100
    ) -> list[Entity]:
        """Entities whose name or alias contains ``q`` (any case), optionally of ``kind``."""
        return self.service.entities(namespace, q, kind=kind, limit=limit)

    def entity(self, namespace: str, entity_id: str) -> dict[str, Any]:
        """One entity (id, name, kind, aliases, possibly_same_as)."""
        return self.service.entity(namespace, entity_id)

    def relationships(
        self, namespace: str, entity_id: str, *, include_expired: bool = False, as_of: Any = None
    ) -> list[Relationship]:
        """An entity's facts valid now (or ``as_of``); ``include_expired``: all of them."""
        at = None if as_of is None else parse_instant(as_of, "as_of")
        return self.service.relationships(
            namespace, entity_id, include_expired=include_expired, as_of=at
        )

    def mentions(self, namespace: str, entity_id: str) -> list[Mention]:
        """The records that mention an entity, each with its own spelling."""
        return self.service.mentions(namespace, entity_id)


def open_memory(
    target: str | os.PathLike[str] | None = None,
    *,
    embedder: EmbedderSpec = None,
    embedders: Mapping[str, EmbedderSpec] | None = None,
    cache_size: int = 0,
    background_jobs: bool = True,
    policy: Policy | None = None,
    create: bool = True,
    extractor: ExtractorSpec = None,
    text_search: Mapping[str, str] | None = None,
    storage: StorageOptions | None = None,
    reranker: RerankerSpec = None,
) -> Memory:
    """Opens (creating if needed) a memory store: a path, a ``sqlite:///`` URL or a
    ``postgresql://`` URL (PostgreSQL with pgvector ≥ 0.8; needs the postgres extra).

    ``embedder`` is the default for every namespace: an ``Embedder``, a provider name
    (``"local"``, ``"hash"``, …), an embedder config, ``"none"``, or ``None`` for the best
    one available offline (the local model when installed, else hashing).
    ``embedders`` binds namespaces to other embedders. With ``background_jobs`` a
    backlog of missing vectors is filled on a background thread, starting now.
    ``policy`` sets caps (as a server has); by default an embedded store has none.
    ``create=False`` opens only a store that exists (a SQLite file that is missing is
    ``erstwhile.not_found``, and nothing is created).
    ``extractor`` reads notes and mined records into the knowledge graph: ``"none"``
    (the default, or ``ERSTWHILE_EXTRACTOR``), ``"heuristic"``, ``"command"``,
    ``"http"``, an extractor config (or its dict) or an ``Extractor``.
    ``text_search`` binds namespaces to a text-search language for lexical search:
    ``"english"`` (the default: stop words dropped, words stemmed) or ``"simple"``
    (every word as written, lower-cased); changing it re-indexes the namespace.
    ``storage`` sizes a PostgreSQL store's pool and its timeouts.
    ``reranker`` re-orders each search's first fused hits (:mod:`erstwhile.rerank`): a
    ``Reranker``, a rerank server's URL, ``"none"``, or ``None`` for
    ``ERSTWHILE_RERANKER_URL`` (unset: no reranking, the default)."""
    default = build_embedder(embedder, cache_size)
    overrides = {ns: build_embedder(spec, cache_size) for ns, spec in (embedders or {}).items()}
    chosen, min_confidence = build_extractor(extractor)
    budget = build_budget(extractor)
    opened = store.open_store(resolve_target(target), create=create, options=storage)
    binding = EmbedderBinding(default, overrides)
    return Memory(
        Service(
            opened, binding, background_jobs=background_jobs, policy=policy, extractor=chosen,
            min_confidence=min_confidence, text_search=text_search,
            reranker=build_reranker(reranker), budget=budget,
        )
    )  # fmt: skip

"""The one façade every interface calls: validation, ids, time, embedding, ranking.

Adapters (the Python API, the CLI, REST, MCP, gRPC) convert their wire format into
domain types once and call this; the store below it holds all SQL.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any, cast

import numpy as np

from erstwhile.domain.errors import (
    ErstwhileError,
    InvalidInput,
    NotFound,
    ProviderFailed,
    ReindexNeeded,
    SemanticUnavailable,
)
from erstwhile.domain.ids import new_id
from erstwhile.domain.ledger import ChangesPage, LedgerEntry
from erstwhile.domain.records import (
    Record,
    UpsertResult,
    superseding,
    updated,
    validate_namespace,
    validate_record_id,
)
from erstwhile.domain.search import (
    Expand,
    ExpireRequest,
    Hit,
    Ranking,
    SearchRequest,
    SearchResult,
    query_words,
)
from erstwhile.domain.time import now_us
from erstwhile.domain.validation import check_counts, quoted
from erstwhile.domain.vectors import (
    MAX_COUNT,
    MAX_INT64,
    caller_space,
    checked_vector,
    unit_rows,
)
from erstwhile.domain.words import check_language, query_terms
from erstwhile.embedding.base import Embedder
from erstwhile.embedding.binding import EmbedderBinding, check_dimensions
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.config import DEFAULT_MIN_CONFIDENCE
from erstwhile.extraction.usage import Budget
from erstwhile.jobs.embed import (
    BackgroundEmbedder,
    JobReport,
    NamespaceLocks,
    Progress,
    mark_interrupted,
    run_embed_job,
)
from erstwhile.jobs.extract import run_extract_job
from erstwhile.jobs.mining import MineReport, MineRequest, run_mine_job
from erstwhile.jobs.rows import JobThreads, Stop
from erstwhile.policy import Policy, admits, check_cap, check_trust
from erstwhile.rerank import Reranker, rerank_hits
from erstwhile.service_context import contexts, embed_in_context
from erstwhile.service_fusion import fuse
from erstwhile.service_graph import GraphMethods
from erstwhile.store.base import Store
from erstwhile.tokens import Access

log = logging.getLogger("erstwhile.service")

LOCAL_ACTOR = "local"
JOB_TYPES = ("embed", "extract", "reindex", "mine")


def _check_scope(request: SearchRequest | ExpireRequest) -> None:
    """The scope's counts (a request built in code skipped the model's checks)."""
    scope = {"tags": request.tags, "filter": request.filter, "predicates": request.predicates}
    check_counts(scope, "", scope=True)


class _AnnouncingStore:
    """The store, telling ``announce`` the id of the job row a job opens."""

    def __init__(self, store: Store, announce: Callable[[int], None]) -> None:
        self._store = store
        self._announce = announce

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int:
        job_id = self._store.job_start(job_type, namespace, now, owner)
        self._announce(job_id)
        return job_id


#: How long ``close`` waits for running jobs to stop before it closes the store anyway.
STOP_JOBS_SECONDS = 3.0

#: Changes per page by default (``changes``).
DEFAULT_CHANGES = 100


class Service(GraphMethods):
    """The one façade every adapter calls: validates input, applies the policy,
    reads the clock once per call, and drives the store, the embedders and jobs."""

    def __init__(
        self,
        store: Store,
        embedders: EmbedderBinding | None = None,
        *,
        background_jobs: bool = False,
        policy: Policy | None = None,
        extractor: Extractor | None = None,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        text_search: Mapping[str, str] | None = None,
        clock: Callable[[], int] = now_us,
        reranker: Reranker | None = None,
        budget: Budget | None = None,
    ) -> None:
        """``text_search`` binds namespaces to a text-search language (SPEC §2;
        :mod:`erstwhile.domain.words`): a namespace indexed in another is re-indexed
        now. Namespaces not named keep theirs (a new one: the default, English)."""
        self.store = store
        #: the one clock of every call (record time); a test may set its own
        self.clock = clock
        self.embedders = embedders or EmbedderBinding(None)
        self.policy = policy or Policy()
        #: the optional rerank stage after fusion (:mod:`erstwhile.rerank`); None: off
        self.reranker = reranker
        self.extractor = extractor
        self.min_confidence = min_confidence
        #: every extract job's budget, unless the one who starts it sets its own
        self.budget = budget or Budget()
        self._job_locks = NamespaceLocks()
        self._extract_locks = NamespaceLocks()
        self._assert_lock = threading.Lock()
        self._jobs = JobThreads()  # its stop, set by close(), ends every job at its next step
        self.background: BackgroundEmbedder | None = None
        mark_interrupted(store)
        for namespace, language in (text_search or {}).items():
            store.set_text_search(validate_namespace(namespace), check_language(language))
        if background_jobs:
            self.background = BackgroundEmbedder(self._background_work)
            for namespace in store.namespaces():
                self._queue_if_backlog(namespace)

    @cached_property
    def access(self) -> Access:
        """Token management (create, list, disable, authenticate) on this store: how
        adapters reach tokens, never through ``store``."""
        return Access(self.store)

    def close(self) -> None:
        """Stops jobs and releases the embedders and the store. A running job is asked
        to stop and ends ``interrupted`` after the step at hand; one that does not stop
        within :data:`STOP_JOBS_SECONDS` (a provider call, say) is left to the process's
        end, and its row is marked at the next open."""
        deadline = time.monotonic() + STOP_JOBS_SECONDS
        self._jobs.stop.set()
        if self.background is not None:
            self.background.stop(timeout=STOP_JOBS_SECONDS)
        self._jobs.stop_all(max(0.0, deadline - time.monotonic()))
        self.embedders.close()
        if self.extractor is not None:
            self.extractor.close()
        if self.reranker is not None:
            self.reranker.close()
        self.store.close()

    def embedder_for(self, namespace: str) -> Embedder | None:
        """The embedder bound to ``namespace`` (None: the namespace has none)."""
        return self.embedders.for_namespace(namespace)

    # -- writes ---------------------------------------------------------------

    def upsert(
        self,
        namespace: str,
        records: Sequence[Record],
        *,
        actor: str = LOCAL_ACTOR,
        units: np.ndarray | None = None,
    ) -> UpsertResult:
        """Validates and writes ``records`` as one all-or-nothing batch (each created or
        revised by the revision rules), embedding what the namespace's embedder can.
        ``units``: when every record comes with a vector, already checked (finite as
        float32, not all zeros) by :func:`~erstwhile.domain.vectors.unit_rows`, its
        rows, in the records' order (the embedder's size is still checked here)."""
        validate_namespace(namespace)
        if not records:
            raise InvalidInput("records must hold at least one record")
        return self.ingest(namespace, records, (), actor=actor, units=units)

    def ingest(
        self,
        namespace: str,
        records: Sequence[Record],
        invalidations: Sequence[tuple[str, int]],
        *,
        actor: str = LOCAL_ACTOR,
        capped: bool = True,
        units: np.ndarray | None = None,
    ) -> UpsertResult:
        """One batch of an ingestion job (import, mine): ``records`` are upserted as by
        :meth:`upsert`, and each ``(id, at)`` of ``invalidations`` is invalidated, all
        in one transaction. ``capped=False``: the batch is the server's own (a mine job
        sizes its batches itself and never splits a document), not a caller's request,
        so the per-request record cap does not apply; the content cap still does."""
        validate_namespace(namespace)
        for record_id, _ in invalidations:
            validate_record_id(record_id, "invalidations[].id")
        for index, record in enumerate(records):  # a record built in code skipped the model's
            check_counts({"tags": record.tags, "metadata": record.metadata}, f"records[{index}].")
        self.policy.check_upsert(records, count=capped)
        embedder = self.embedder_for(namespace)
        given = [r.vector for r in records if r.vector is not None]
        if embedder is None or not given:
            units = None
        elif units is not None and len(given) == len(records) == len(units):
            if units.shape[1] != embedder.dimensions:
                units = None  # the one-by-one checks below name the first record
        elif len(given) == len(records):  # all checked at once; one by one if any is bad
            units = unit_rows(given, embedder.dimensions)
        else:
            units = None
        prepared: list[Record] = []
        seen: set[str] = set()
        for index, record in enumerate(records):
            if record.id:
                validate_record_id(record.id, f"records[{index}].id")
            else:
                record = updated(record, {"id": new_id()})
            if record.id in seen:
                raise InvalidInput(
                    f"records[{index}].id {record.id!r} appears twice in one batch; "
                    "send one write per id"
                )
            seen.add(record.id)
            if record.vector is None and not record.content.strip():
                raise InvalidInput(
                    f"records[{index}].content is empty: give the text to remember "
                    "(or a vector to store without text)"
                )
            if record.vector is not None:
                field = f"records[{index}].vector"
                if embedder is None:  # the caller's own space (caller_space)
                    checked_vector(record.vector, field, len(given[0]))
                elif units is None:  # checked here; the store keeps it at unit length
                    check_dimensions(embedder, record.vector, field)
            prepared.append(record)
        warnings: list[str] = []
        if embedder is not None and units is None:
            prepared = self._embed_inline(namespace, embedder, prepared, warnings)
        written = self.store.upsert(
            namespace,
            prepared,
            now=self.clock(),
            actor=actor,
            embedder_id=embedder.embedder_id
            if embedder
            else (caller_space(len(given[0])) if given else None),
            invalidations=invalidations,
            units=units,
        )
        if warnings or self.extractor is not None:
            self._queue_if_backlog(namespace)
        return UpsertResult(
            ids=[i for i, _ in written], versions=[v for _, v in written], warnings=warnings
        )

    def _embed_inline(
        self, namespace: str, embedder: Embedder, records: list[Record], warnings: list[str]
    ) -> list[Record]:
        """Embeds the records that came without a vector, each that names a conversation
        or session with the record before it (:mod:`erstwhile.service_context`). A
        provider failure never fails the write: the record is stored and the embed job
        retries later."""
        todo = [i for i, r in enumerate(records) if r.vector is None]
        if not todo:
            return records
        befores = contexts(self.store, namespace, records, self.clock())
        try:
            vectors = embed_in_context(
                embedder, [records[i].content for i in todo], [befores[i] for i in todo]
            )
        except ProviderFailed as error:
            warnings.append(
                f"embedding_failed: {error.message}; stored without a vector, "
                "the embed job will retry"
            )
            return records
        embedded = list(records)
        for position, index in enumerate(todo):
            embedded[index] = records[index].model_copy(
                update={"vector": vectors[position].tolist()}
            )
        return embedded

    def set_embedding(
        self, namespace: str, record_id: str, vector: list[float], *, actor: str = LOCAL_ACTOR
    ) -> None:
        """Stores a caller-computed vector for a record, checked against the
        namespace's embedder dimensions."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        embedder = self.embedder_for(namespace)
        if embedder is None:  # the caller's own space, one per size
            unit, space = checked_vector(vector, "vector"), caller_space(len(vector))
        else:
            unit, space = check_dimensions(embedder, vector, "vector"), embedder.embedder_id
        self.store.set_embedding(
            namespace, record_id, space, unit,
            now=self.clock(), actor=actor,
        )  # fmt: skip

    def supersede(
        self, namespace: str, old_id: str, record: Record, *, actor: str = LOCAL_ACTOR
    ) -> UpsertResult:
        """Writes ``record`` as the successor of ``old_id`` (closing the old one)."""
        return self.upsert(namespace, [superseding(record, old_id)], actor=actor)

    def invalidate(
        self, namespace: str, record_id: str, at: int | None = None, *, actor: str = LOCAL_ACTOR
    ) -> int:
        """Ends a record's validity at ``at`` (default now) without a successor;
        returns the current version."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        now = self.clock()
        version = self.store.invalidate(
            namespace, record_id, now if at is None else at, now=now, actor=actor
        )
        if self.extractor is not None:
            self._queue_if_backlog(namespace)  # the sweep closes what the record said
        return version

    def delete(
        self, namespace: str, record_id: str, *, hard: bool = False, actor: str = LOCAL_ACTOR
    ) -> None:
        """Soft deletes (a tombstone; history kept) or hard deletes every trace."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        self.store.delete(namespace, record_id, hard=hard, now=self.clock(), actor=actor)

    def expire(self, namespace: str, request: ExpireRequest, *, actor: str = LOCAL_ACTOR) -> int:
        """Applies an expire request within the policy caps; returns how many records."""
        validate_namespace(namespace)
        _check_scope(request)
        self.policy.check_expire(request)
        return self.store.expire(namespace, request, now=self.clock(), actor=actor)

    def verify(
        self, namespace: str, record_id: str, reviewer: str, *, actor: str = LOCAL_ACTOR
    ) -> int:
        """Marks a record verified by ``reviewer``; returns the current version."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        if not reviewer or not reviewer.strip():
            raise InvalidInput("reviewer must name who verified the record")
        return self.store.verify(namespace, record_id, reviewer, now=self.clock(), actor=actor)

    # -- jobs -----------------------------------------------------------------

    def embed(
        self, namespace: str, *, progress: Progress | None = None, reindex: bool = False
    ) -> JobReport:
        """Fills the namespace's vector backlog now (``reindex``: re-embed everything)."""
        return self._embed(self.store, namespace, progress=progress, reindex=reindex)

    def _embed(
        self, store: Store, namespace: str, *, progress: Progress | None, reindex: bool
    ) -> JobReport:
        validate_namespace(namespace)
        embedder = self.embedder_for(namespace)
        if embedder is None:
            raise SemanticUnavailable(f"namespace {namespace!r} has no embedder configured")
        return run_embed_job(
            store, namespace, embedder, progress=progress,
            job_type="reindex" if reindex else "embed", lock=self._job_locks(namespace),
            stop=self._jobs.stop,
        )  # fmt: skip

    def mine(
        self,
        namespace: str,
        request: MineRequest,
        *,
        progress: Progress | None = None,
        actor: str = LOCAL_ACTOR,
    ) -> MineReport:
        """Mines a folder into the namespace now (SPEC §9; see :mod:`erstwhile.jobs.mining`),
        then queues the jobs that derive from what it wrote."""
        return self._mine(self.store, namespace, request, progress=progress, actor=actor)

    def _mine(
        self,
        store: Store,
        namespace: str,
        request: MineRequest,
        *,
        progress: Progress | None,
        actor: str,
    ) -> MineReport:
        validate_namespace(namespace)

        def write(records: list[Record], invalidations: list[tuple[str, int]]) -> UpsertResult:
            return self.ingest(namespace, records, invalidations, actor=actor, capped=False)

        report = run_mine_job(store, write, namespace, request, progress=progress,
                              lock=self._job_locks(f"mine {namespace}"),
                              stop=self._jobs.stop)  # fmt: skip
        self.queue_derived(namespace)
        return report

    def queue_derived(self, namespace: str) -> None:
        """Queues the jobs that derive data from newly ingested records (on the
        background worker, when this service runs one): embed, for any vector backlog,
        and extract (SPEC §8), which reads mined records, when an extractor is set."""
        self._queue_if_backlog(namespace)

    def start_job(
        self,
        job_type: str,
        namespace: str,
        mine: MineRequest | None = None,
        *,
        actor: str = LOCAL_ACTOR,
        budget: Budget | None = None,
    ) -> int:
        """Starts an ``embed``, ``extract``, ``reindex`` or ``mine`` job (``mine`` says what
        to mine; ``budget`` an extract job's limits, over the configured ones) on its own
        thread and returns the id of its job row as soon as it has one; ``jobs()``
        follows it from there."""
        if job_type not in JOB_TYPES:
            raise InvalidInput(
                f"type {quoted(job_type)} is not a job erstwhile runs; use one of "
                + ", ".join(JOB_TYPES)
            )
        validate_namespace(namespace)
        if (job_type == "mine") != (mine is not None):
            raise InvalidInput(
                "path is required for a mine job (the folder to mine)"
                if job_type == "mine"
                else f"path, include, exclude and source apply to mine jobs only, not {job_type}"
            )
        if budget is not None and budget != Budget() and job_type != "extract":
            raise InvalidInput(
                f"max_calls and max_tokens apply to extract jobs only, not {job_type}; "
                "leave them out"
            )
        if mine is not None:
            mine.folder()  # refused now, before a job row exists, when it is not a folder
        elif job_type == "extract":
            extractor = self._require_extractor(namespace)
        elif self.embedder_for(namespace) is None:
            raise SemanticUnavailable(f"namespace {namespace!r} has no embedder configured")
        started: queue.Queue[int | ErstwhileError] = queue.Queue()
        store = cast(Store, _AnnouncingStore(self.store, started.put))

        def work() -> None:
            try:
                if mine is not None:
                    self._mine(store, namespace, mine, progress=None, actor=actor)
                elif job_type == "extract":
                    run_extract_job(store, namespace, extractor,
                                    min_confidence=self.min_confidence, clock=self.clock,
                                    lock=self._extract_locks(namespace),
                                    stop=self._jobs.stop,
                                    budget=(budget or Budget()).or_else(self.budget))  # fmt: skip
                else:
                    self._embed(store, namespace, progress=None, reindex=job_type == "reindex")
            except ErstwhileError as error:
                started.put(error)  # ignored when the job row exists: it records the failure
            except BaseException as error:  # a worker thread must not die silently
                if not isinstance(error, Stop):
                    log.exception("%s job for %s crashed", job_type, namespace)
                started.put(ErstwhileError(f"the {job_type} job crashed: {error!r}"))

        self._jobs.start(work, f"erstwhile-{job_type}")
        outcome = started.get()  # the row opens before the job waits for anything
        if isinstance(outcome, ErstwhileError):
            raise outcome
        return outcome

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Job rows, oldest first: id, type, namespace, state, done, error, created_at,
        updated_at (instants in microseconds)."""
        return self.store.jobs(namespace)

    def job(self, job_id: int) -> dict[str, Any]:
        """One job by id, or :class:`NotFound`."""
        # ids are 64-bit integers in both stores: a larger number names no job
        for job in self.store.jobs(job_id=job_id) if abs(job_id) < 2**63 else []:
            return job
        raise NotFound(f"job {job_id} does not exist")

    def namespaces(self) -> list[str]:
        """Every namespace written to, by name."""
        return self.store.namespaces()

    def audit(self, namespace: str) -> dict[str, Any]:
        """A namespace's embedder, vector backlog and recent jobs."""
        validate_namespace(namespace)
        if namespace not in self.store.namespaces():
            raise NotFound(f"namespace {namespace!r} does not exist (nothing was written to it)")
        return {
            "namespace": namespace,
            "embedder": self.embedders.describe(namespace),
            "backlog": self.backlog(namespace),
            "records": self.store.record_counts(namespace, now_us()),
            "extractor": self.describe_extractor(),
            "extraction_backlog": self.extraction_backlog(namespace),
            "jobs": self.store.jobs(namespace, last=10),
        }

    def _background_work(self, namespace: str) -> None:
        """A queued namespace's backlogs: vectors first, then the graph."""
        embedder = self.embedder_for(namespace)
        if embedder is not None and self.store.backlog_count(namespace, embedder.embedder_id):
            run_embed_job(self.store, namespace, embedder, lock=self._job_locks(namespace),
                          stop=self._jobs.stop)  # fmt: skip
        graph = self.store.graph
        if self.extractor is not None and (
            self.extraction_backlog(namespace) or graph.unswept(namespace)
        ):  # a job row only when there is work: writes queue this often
            run_extract_job(self.store, namespace, self.extractor,
                            min_confidence=self.min_confidence, clock=self.clock,
                            lock=self._extract_locks(namespace), stop=self._jobs.stop,
                            budget=self.budget)  # fmt: skip

    def _queue_if_backlog(self, namespace: str) -> None:
        if self.background is None:
            return
        embedder = self.embedder_for(namespace)
        if embedder is not None and self.store.backlog_count(namespace, embedder.embedder_id):
            self.background.schedule(namespace)
        elif self.extractor is not None:
            # the extract job also sweeps, so it runs after any change, backlog or not
            self.background.schedule(namespace)

    def backlog(self, namespace: str) -> int:
        """How many records of ``namespace`` have no vector from its embedder yet."""
        embedder = self.embedder_for(namespace)
        return self.store.backlog_count(namespace, embedder.embedder_id) if embedder else 0

    # -- reads ----------------------------------------------------------------

    def get(
        self,
        namespace: str,
        record_id: str,
        version: int | None = None,
        known_at: int | None = None,
        *,
        min_trust: str | None = None,
    ) -> Record:
        """The current record, one of its versions, or its version as known at record
        time ``known_at``; :class:`NotFound` if none, or if it is below the trust view
        (``min_trust``, else the namespace's default view)."""
        view = self.policy.view(namespace, check_trust(min_trust, "min_trust"))
        record = self._get(namespace, record_id, version, known_at)
        if not admits(view, record):
            raise NotFound(
                f"record {record_id!r} is {record.trust} and namespace {namespace!r} is "
                f"read with trust view {view!r}; ask with min_trust unverified to see it"
            )
        return record

    def _get(
        self, namespace: str, record_id: str, version: int | None, known_at: int | None
    ) -> Record:
        validate_namespace(namespace)
        validate_record_id(record_id)
        if version is not None and version < 1:
            raise InvalidInput(f"version must be 1 or more, got {version}")
        if known_at is not None:
            if version is not None:
                raise InvalidInput("version and known_at are mutually exclusive; choose one")
            return self.store.get(namespace, record_id, known_at=known_at)
        try:
            if version is not None and version > MAX_INT64:
                # versions are 64-bit in both stores: a larger number names no version
                raise NotFound(f"record {record_id!r} has no version {version}")
            return self.store.get(namespace, record_id, version)
        except NotFound:
            if version is not None and not self.store.versions(namespace, record_id):
                # asked for a version of a record that is not there at all: say that
                raise NotFound(
                    f"record {record_id!r} does not exist in namespace {namespace!r}"
                ) from None
            raise

    def history(
        self,
        namespace: str,
        record_id: str,
        known_at: int | None = None,
        *,
        versions: bool = False,
        min_trust: str | None = None,
    ) -> list[Record]:
        """Every record of the supersession chain through ``record_id``, oldest first;
        as known at record time ``known_at`` when given. Each carries its record-time
        range: from ``updated_at`` until ``known_until``, the instant a later version
        replaced it (None while current). With ``versions``, every stored version of
        each record of the chain (in-place rewrites too), oldest first in record time.
        Versions below the trust view (``min_trust``, else the namespace's default
        view) are left out; :class:`NotFound` when that leaves none."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        view = self.policy.view(namespace, check_trust(min_trust, "min_trust"))
        chain = self.store.history(namespace, record_id, known_at, versions=versions)
        seen = [record for record in chain if admits(view, record)]
        if chain and not seen:
            raise NotFound(
                f"no version of record {record_id!r} is {view}, the trust view namespace "
                f"{namespace!r} is read with; ask with min_trust unverified to see them"
            )
        return seen

    def changes(
        self,
        namespace: str,
        since: int,
        until: int | None = None,
        *,
        after: int | None = None,
        limit: int = DEFAULT_CHANGES,
    ) -> ChangesPage:
        """What was recorded in the namespace in record time ``[since, until)`` (until
        now by default): added, revised, superseded, invalidated, deleted and verified records,
        oldest first, a page of ``limit`` after ledger seq ``after``."""
        validate_namespace(namespace)
        until = self.clock() + 1 if until is None else until
        if since >= until:
            raise InvalidInput("since must be earlier than until (the period is empty)")
        if not 1 <= limit <= MAX_COUNT:
            raise InvalidInput(f"limit must be between 1 and {MAX_COUNT}, got {limit}")
        if after is not None and not 0 <= after <= MAX_INT64:
            raise InvalidInput(f"after must be a seq from a previous page, got {after}")
        return self.store.changes(namespace, since, until, after=after, limit=limit)

    def ledger(self, namespace: str, record_id: str) -> list[LedgerEntry]:
        """The ledger entries of one record id, oldest first (a hard-deleted id keeps
        them); :class:`NotFound` when the ledger never saw the id."""
        validate_namespace(namespace)
        validate_record_id(record_id)
        entries = self.store.ledger(namespace, record_id)
        if not entries:
            raise NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")
        return entries

    def search(self, namespace: str, request: SearchRequest) -> SearchResult:
        """Runs a search (lexical, semantic or hybrid; scoped in time) within the policy
        caps, fusing lanes and reporting what could not be searched as warnings."""
        validate_namespace(namespace)
        _check_scope(request)
        self.policy.check_search(request)
        request = self.policy.viewed(namespace, request)  # every lane and hop sees it
        if isinstance(request.expand, Expand):
            check_cap(request.expand.limit, self.policy.max_top_k, "expand.limit", "max_top_k",
                 "ask for fewer related records")  # fmt: skip
        window = request.window(self.clock())
        warnings: list[str] = []
        embedder = self.embedder_for(namespace)
        ranking, query_vector = self._plan(namespace, request, embedder, warnings)
        unembedded = 0
        lexical: list[tuple[Record, float]] = []
        semantic: list[tuple[Record, float]] = []
        # a reranker sees up to its depth of fused hits, then top_k are kept
        rerank = self.reranker is not None and bool(request.query)
        wanted = max(request.top_k, self.reranker.depth) if rerank and self.reranker else (
            request.top_k
        )  # fmt: skip
        depth = (
            wanted if ranking != Ranking.HYBRID else max(wanted, self.policy.lane_depth(request))
        )
        if ranking in (Ranking.LEXICAL, Ranking.HYBRID):
            lexical = self.store.lexical(namespace, request, window, depth)
        if ranking == Ranking.LEXICAL and not lexical and not self._searchable(namespace, request):
            warnings.append("query has no searchable words; nothing was matched")
        space = self._space(embedder, request)
        if ranking in (Ranking.SEMANTIC, Ranking.HYBRID):
            assert space is not None and query_vector is not None
            semantic, unembedded = self.store.semantic(
                namespace, request, window, space, query_vector, depth
            )
            if unembedded and request.require_complete:
                raise ReindexNeeded(
                    f"{unembedded} in-scope records of namespace {namespace!r} have no vector "
                    f"for {space} yet; run `erstwhile embed` (or drop "
                    "require_complete)"
                )
            if unembedded:
                warnings.append(
                    f"unembedded: {unembedded} in-scope records have no vector yet and were "
                    "invisible to the semantic lane"
                )
        hits = fuse(ranking, lexical, semantic, wanted)
        if rerank and self.reranker is not None:
            hits = rerank_hits(self.reranker, request.query or "", hits)
        hits = hits[: request.top_k]
        if request.expand:
            hits = self._expand(namespace, request, window, hits)
        if request.include_vector and space is not None and not request.ids_only:
            vectors = self.store.vectors_for(namespace, [h.record.id for h in hits],
                                             space)  # fmt: skip
            for hit in hits:
                hit.record.vector = vectors.get(hit.record.id)
        if request.ids_only:  # SPEC §6: only each hit's record.id and score
            hits = [Hit(record=Record(id=hit.record.id), score=hit.score) for hit in hits]
        return SearchResult(
            hits=hits, ranking=ranking, unembedded=unembedded, warnings=warnings,
            ids_only=request.ids_only,
        )  # fmt: skip

    @staticmethod
    def _space(embedder: Embedder | None, request: SearchRequest) -> str | None:
        """The vector space the semantic lane reads: the embedder's, else (a query
        vector in a namespace without one) the callers' space of its size."""
        if embedder is not None:
            return embedder.embedder_id
        if request.query_vector is not None:
            return caller_space(len(request.query_vector))
        return None

    def _searchable(self, namespace: str, request: SearchRequest) -> bool:
        """Whether the query has a term the lexical lane could match (not only stop
        words, in the namespace's language)."""
        return bool(query_terms(request.query or "", self.store.text_search(namespace)))

    @staticmethod
    def _plan(
        namespace: str, request: SearchRequest, embedder: Embedder | None, warnings: list[str]
    ) -> tuple[Ranking, np.ndarray | None]:
        """Decides the lanes: keeps a promise or refuses it, and says when auto degrades."""
        ranking = request.ranking
        if request.query_vector is not None:
            # a unit vector: scores are then cosine similarities
            if embedder is None:  # compared with the vectors callers brought (caller_space)
                return Ranking.SEMANTIC, checked_vector(request.query_vector, "query_vector")
            return Ranking.SEMANTIC, check_dimensions(
                embedder, request.query_vector, "query_vector"
            )
        if ranking == Ranking.LEXICAL:
            return ranking, None
        if ranking == Ranking.AUTO and not query_words(request.query or ""):
            return Ranking.LEXICAL, None  # nothing to match or embed; the caller warns
        reason = None
        vector: np.ndarray | None = None
        if embedder is None:
            reason = f"namespace {namespace!r} has no embedder configured"
        else:
            try:
                vector = embedder.embed_query(request.query or "")
            except ProviderFailed as error:
                reason = f"the query could not be embedded ({error.message})"
        if vector is None:
            if ranking != Ranking.AUTO:
                raise SemanticUnavailable(
                    f"ranking {ranking.value} needs a query vector, but {reason}; "
                    "use ranking lexical or auto"
                )
            warnings.append(f"semantic_unavailable: {reason}; answered lexically")
            return Ranking.LEXICAL, None
        return (Ranking.HYBRID if ranking == Ranking.AUTO else ranking), vector

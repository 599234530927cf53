"""The one façade every interface calls: validation, ids, time, embedding, ranking.

Adapters (the Python API, the CLI, REST, MCP, gRPC) convert their wire format into
domain types once and call this; the store below it holds all SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.domain.errors import (
    InvalidInput,
    ProviderFailed,
    ReindexNeeded,
    SemanticUnavailable,
)
from memstrata.domain.fusion import RRF_K, reciprocal_rank_fusion
from memstrata.domain.ids import new_id
from memstrata.domain.records import Record, UpsertResult, validate_namespace, validate_record_id
from memstrata.domain.search import (
    ExpireRequest,
    Hit,
    Ranking,
    SearchRequest,
    SearchResult,
    query_words,
)
from memstrata.domain.time import now_us
from memstrata.embedding.base import Embedder
from memstrata.embedding.binding import EmbedderBinding, check_dimensions
from memstrata.jobs.embed import (
    BackgroundEmbedder,
    JobReport,
    NamespaceLocks,
    Progress,
    run_embed_job,
)
from memstrata.store.base import Store

LOCAL_ACTOR = "local"


class Service:
    def __init__(
        self,
        store: Store,
        embedders: EmbedderBinding | None = None,
        *,
        background_jobs: bool = False,
    ) -> None:
        self.store = store
        self.embedders = embedders or EmbedderBinding(None)
        self._job_locks = NamespaceLocks()
        self.background: BackgroundEmbedder | None = None
        if background_jobs:
            self.background = BackgroundEmbedder(self._background_embed)
            for namespace in store.namespaces():
                self._queue_if_backlog(namespace)

    def close(self) -> None:
        if self.background is not None:
            self.background.stop()
        self.embedders.close()
        self.store.close()

    def embedder_for(self, namespace: str) -> Embedder | None:
        return self.embedders.for_namespace(namespace)

    # -- writes ---------------------------------------------------------------

    def upsert(
        self, namespace: str, records: Sequence[Record], *, actor: str = LOCAL_ACTOR
    ) -> UpsertResult:
        validate_namespace(namespace)
        if not records:
            raise InvalidInput("records must hold at least one record")
        embedder = self.embedder_for(namespace)
        prepared: list[Record] = []
        seen: set[str] = set()
        for index, record in enumerate(records):
            if record.id:
                validate_record_id(record.id, f"records[{index}].id")
            else:
                record = record.model_copy(update={"id": new_id()})
            if record.id in seen:
                raise InvalidInput(
                    f"records[{index}].id {record.id!r} appears twice in one batch; "
                    "send one write per id"
                )
            seen.add(record.id)
            if record.vector is not None:
                if embedder is None:
                    raise SemanticUnavailable(
                        f"records[{index}].vector was given but namespace {namespace!r} has "
                        "no embedder to store it under; configure one"
                    )
                check_dimensions(embedder, record.vector, f"records[{index}].vector")
            prepared.append(record)
        warnings: list[str] = []
        if embedder is not None:
            prepared = self._embed_inline(embedder, prepared, warnings)
        written = self.store.upsert(
            namespace,
            prepared,
            now=now_us(),
            actor=actor,
            embedder_id=embedder.embedder_id if embedder else None,
        )
        if warnings:
            self._queue_if_backlog(namespace)
        return UpsertResult(
            ids=[i for i, _ in written], versions=[v for _, v in written], warnings=warnings
        )

    @staticmethod
    def _embed_inline(
        embedder: Embedder, records: list[Record], warnings: list[str]
    ) -> list[Record]:
        """Embeds the records that came without a vector. A provider failure never
        fails the write: the record is stored and the embed job retries later."""
        todo = [i for i, r in enumerate(records) if r.vector is None]
        if not todo:
            return records
        try:
            vectors = embedder.embed_documents([records[i].content for i in todo])
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
        validate_namespace(namespace)
        validate_record_id(record_id)
        embedder = self.embedder_for(namespace)
        if embedder is None:
            raise SemanticUnavailable(
                f"namespace {namespace!r} has no embedder to store a vector under"
            )
        check_dimensions(embedder, vector, "vector")
        self.store.set_embedding(
            namespace, record_id, embedder.embedder_id, np.asarray(vector, dtype=np.float32),
            now=now_us(), actor=actor,
        )  # fmt: skip

    def supersede(
        self, namespace: str, old_id: str, record: Record, *, actor: str = LOCAL_ACTOR
    ) -> UpsertResult:
        validate_record_id(old_id, "old_id")
        merged = record.model_copy(update={"supersedes": [*record.supersedes, old_id]})
        return self.upsert(namespace, [merged], actor=actor)

    def invalidate(
        self, namespace: str, record_id: str, at: int | None = None, *, actor: str = LOCAL_ACTOR
    ) -> int:
        validate_namespace(namespace)
        validate_record_id(record_id)
        now = now_us()
        return self.store.invalidate(
            namespace, record_id, now if at is None else at, now=now, actor=actor
        )

    def delete(
        self, namespace: str, record_id: str, *, hard: bool = False, actor: str = LOCAL_ACTOR
    ) -> None:
        validate_namespace(namespace)
        validate_record_id(record_id)
        self.store.delete(namespace, record_id, hard=hard, now=now_us(), actor=actor)

    def expire(self, namespace: str, request: ExpireRequest, *, actor: str = LOCAL_ACTOR) -> int:
        validate_namespace(namespace)
        return self.store.expire(namespace, request, now=now_us(), actor=actor)

    def verify(
        self, namespace: str, record_id: str, reviewer: str, *, actor: str = LOCAL_ACTOR
    ) -> int:
        validate_namespace(namespace)
        validate_record_id(record_id)
        if not reviewer or not reviewer.strip():
            raise InvalidInput("reviewer must name who verified the record")
        return self.store.verify(namespace, record_id, reviewer, now=now_us(), actor=actor)

    # -- jobs -----------------------------------------------------------------

    def embed(
        self, namespace: str, *, progress: Progress | None = None, reindex: bool = False
    ) -> JobReport:
        """Fills the namespace's vector backlog now (``reindex``: re-embed everything)."""
        validate_namespace(namespace)
        embedder = self.embedder_for(namespace)
        if embedder is None:
            raise SemanticUnavailable(f"namespace {namespace!r} has no embedder configured")
        with self._job_locks(namespace):
            if reindex:
                self.store.clear_vectors(namespace, embedder.embedder_id)
            return run_embed_job(
                self.store, namespace, embedder, progress=progress,
                job_type="reindex" if reindex else "embed",
            )  # fmt: skip

    def _background_embed(self, namespace: str) -> None:
        embedder = self.embedder_for(namespace)
        if embedder is not None:
            with self._job_locks(namespace):
                run_embed_job(self.store, namespace, embedder)

    def _queue_if_backlog(self, namespace: str) -> None:
        embedder = self.embedder_for(namespace)
        if self.background is None or embedder is None:
            return
        if self.store.backlog_count(namespace, embedder.embedder_id):
            self.background.schedule(namespace)

    def backlog(self, namespace: str) -> int:
        embedder = self.embedder_for(namespace)
        return self.store.backlog_count(namespace, embedder.embedder_id) if embedder else 0

    # -- reads ----------------------------------------------------------------

    def get(self, namespace: str, record_id: str, version: int | None = None) -> Record:
        validate_namespace(namespace)
        validate_record_id(record_id)
        if version is not None and version < 1:
            raise InvalidInput(f"version must be 1 or more, got {version}")
        return self.store.get(namespace, record_id, version)

    def history(self, namespace: str, record_id: str) -> list[Record]:
        validate_namespace(namespace)
        validate_record_id(record_id)
        return self.store.history(namespace, record_id)

    def search(self, namespace: str, request: SearchRequest) -> SearchResult:
        validate_namespace(namespace)
        window = request.window(now_us())
        warnings: list[str] = []
        embedder = self.embedder_for(namespace)
        ranking, query_vector = self._plan(namespace, request, embedder, warnings)
        if ranking == Ranking.LEXICAL and not query_words(request.query or ""):
            warnings.append("query has no searchable words; nothing was matched")
        unembedded = 0
        lexical: list[tuple[Record, float]] = []
        semantic: list[tuple[Record, float]] = []
        depth = request.top_k if ranking != Ranking.HYBRID else request.lane_depth()
        if ranking in (Ranking.LEXICAL, Ranking.HYBRID):
            lexical = self.store.lexical(namespace, request, window, depth)
        if ranking in (Ranking.SEMANTIC, Ranking.HYBRID):
            assert embedder is not None and query_vector is not None
            semantic, unembedded = self.store.semantic(
                namespace, request, window, embedder.embedder_id, query_vector, depth
            )
            if unembedded and request.require_complete:
                raise ReindexNeeded(
                    f"{unembedded} in-scope records of namespace {namespace!r} have no vector "
                    f"for {embedder.embedder_id} yet; run `memstrata embed` (or drop "
                    "require_complete)"
                )
            if unembedded:
                warnings.append(
                    f"unembedded: {unembedded} in-scope records have no vector yet and were "
                    "invisible to the semantic lane"
                )
        hits = fuse(ranking, lexical, semantic, request.top_k)
        if request.include_vector and embedder is not None:
            vectors = self.store.vectors_for(namespace, [h.record.id for h in hits],
                                             embedder.embedder_id)  # fmt: skip
            for hit in hits:
                hit.record.vector = vectors.get(hit.record.id)
        return SearchResult(
            hits=hits, ranking=ranking, unembedded=unembedded, warnings=warnings,
            ids_only=request.ids_only,
        )  # fmt: skip

    @staticmethod
    def _plan(
        namespace: str, request: SearchRequest, embedder: Embedder | None, warnings: list[str]
    ) -> tuple[Ranking, np.ndarray | None]:
        """Decides the lanes: keeps a promise or refuses it, and says when auto degrades."""
        ranking = request.ranking
        if request.query_vector is not None:
            if embedder is None:
                raise SemanticUnavailable(
                    f"query_vector was given but namespace {namespace!r} has no embedder "
                    "whose vectors it could be compared with"
                )
            check_dimensions(embedder, request.query_vector, "query_vector")
            return Ranking.SEMANTIC, np.asarray(request.query_vector, dtype=np.float32)
        if ranking == Ranking.LEXICAL:
            return ranking, None
        if ranking == Ranking.AUTO and not query_words(request.query or ""):
            return Ranking.LEXICAL, None  # nothing to match or embed; the caller warns
        reason = None
        vector = None
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


def fuse(
    ranking: Ranking,
    lexical: list[tuple[Record, float]],
    semantic: list[tuple[Record, float]],
    top_k: int,
) -> list[Hit]:
    """Turns lane results into hits: one lane as is, or both fused by RRF (k = 60)."""
    signals: dict[str, dict[str, dict[str, float | int | str]]] = {}
    records: dict[str, Record] = {}
    for rank, (record, score) in enumerate(lexical, start=1):
        records[record.id] = record
        signals.setdefault(record.id, {})["lexical"] = {"rank": rank, "score": score}
    for rank, (record, similarity) in enumerate(semantic, start=1):
        records[record.id] = record
        signals.setdefault(record.id, {})["semantic"] = {"rank": rank, "similarity": similarity}
    if ranking == Ranking.HYBRID:
        fused = reciprocal_rank_fusion(
            [[r.id for r, _ in lexical], [r.id for r, _ in semantic]], RRF_K
        )
    else:
        fused = [(r.id, score) for r, score in (lexical or semantic)]
    return [
        Hit(record=records[record_id], score=score, signals=signals[record_id])
        for record_id, score in fused[:top_k]
    ]

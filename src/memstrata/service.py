"""The one façade every interface calls: validation, ids, time, embedding, ranking.

Adapters (the Python API, the CLI, REST, MCP, gRPC) convert their wire format into
domain types once and call this; the store below it holds all SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.domain.errors import InvalidInput, SemanticUnavailable
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
from memstrata.store.sqlite.store import SqliteStore

LOCAL_ACTOR = "local"


class Service:
    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def close(self) -> None:
        self.store.close()

    # -- writes ---------------------------------------------------------------

    def upsert(
        self, namespace: str, records: Sequence[Record], *, actor: str = LOCAL_ACTOR
    ) -> UpsertResult:
        validate_namespace(namespace)
        if not records:
            raise InvalidInput("records must hold at least one record")
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
                raise SemanticUnavailable(
                    f"records[{index}].vector was given but namespace {namespace!r} has no "
                    "embedder configured to store it under"
                )
            prepared.append(record)
        written = self.store.upsert(namespace, prepared, now=now_us(), actor=actor)
        return UpsertResult(ids=[i for i, _ in written], versions=[v for _, v in written])

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
        ranking = request.ranking
        if ranking in (Ranking.SEMANTIC, Ranking.HYBRID) or request.query_vector is not None:
            raise SemanticUnavailable(
                f"ranking {ranking.value} needs an embedder, and namespace {namespace!r} has "
                "none; configure one or use ranking lexical"
            )
        if ranking == Ranking.AUTO:
            warnings.append(
                "semantic_unavailable: no embedder for this namespace; answered lexically"
            )
        hits = [
            Hit(record=self._shape(record, request), score=score,
                signals={"lexical": {"rank": rank, "score": score}})
            for rank, (record, score) in enumerate(
                self.store.lexical(namespace, request, window, request.top_k), start=1
            )
        ]  # fmt: skip
        if request.query is not None and not query_words(request.query):
            warnings.append("query has no searchable words; nothing was matched")
        return SearchResult(
            hits=hits, ranking=Ranking.LEXICAL, warnings=warnings, ids_only=request.ids_only
        )

    @staticmethod
    def _shape(record: Record, request: SearchRequest) -> Record:
        if request.ids_only:
            return Record.model_construct(id=record.id, namespace=record.namespace)
        return record

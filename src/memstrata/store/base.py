"""The Store protocol: what every backend implements, and all the service may call.

Backends: ``sqlite`` (embedded default) and ``postgres``. Instants are integer
microseconds since the epoch; the service passes ``now`` so one call has one clock.
Every mutation runs in one transaction and appends to the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from memstrata.domain.auth import Token
from memstrata.domain.ledger import LedgerEntry
from memstrata.domain.records import Record
from memstrata.domain.search import ExpireRequest, SearchRequest
from memstrata.domain.time import Window

JOB_FIELDS = (
    "id", "type", "namespace", "state", "done", "error", "created_at", "updated_at", "owner",
)  # fmt: skip


def jobs_query(
    mark: str,
    namespace: str | None = None,
    *,
    state: str | None = None,
    job_id: int | None = None,
    last: int | None = None,
) -> tuple[str, list[Any]]:
    """The SELECT of job rows (JOB_FIELDS, oldest first) that match every filter given,
    only the ``last`` ones if asked; ``mark`` is the backend's placeholder."""
    where = []
    params: list[Any] = []
    for column, value in (("namespace", namespace), ("state", state), ("id", job_id)):
        if value is not None:
            where.append(f"{column} = {mark}")
            params.append(value)
    sql = f"SELECT {', '.join(JOB_FIELDS)} FROM jobs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if last is not None:
        sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT {mark}) latest"
        params.append(last)
    return sql + " ORDER BY id", params


class Store(Protocol):
    backend: str

    def close(self) -> None: ...

    # writes
    def upsert(
        self,
        namespace: str,
        records: Sequence[Record],
        *,
        now: int,
        actor: str,
        embedder_id: str | None = None,
    ) -> list[tuple[str, int]]: ...
    def invalidate(
        self, namespace: str, record_id: str, at: int, *, now: int, actor: str
    ) -> int: ...
    def delete(
        self, namespace: str, record_id: str, *, hard: bool, now: int, actor: str
    ) -> None: ...
    def verify(
        self, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str
    ) -> int: ...
    def expire(self, namespace: str, request: ExpireRequest, *, now: int, actor: str) -> int: ...
    def set_embedding(
        self,
        namespace: str,
        record_id: str,
        embedder_id: str,
        vector: np.ndarray,
        *,
        now: int,
        actor: str,
    ) -> None: ...

    # reads
    def get(self, namespace: str, record_id: str, version: int | None = None) -> Record: ...
    def versions(self, namespace: str, record_id: str) -> list[int]: ...
    def history(self, namespace: str, record_id: str) -> list[Record]: ...
    def lexical(
        self, namespace: str, request: SearchRequest, window: Window | None, limit: int
    ) -> list[tuple[Record, float]]: ...
    def semantic(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> tuple[list[tuple[Record, float]], int]: ...

    # derived vectors (rowid = the backend's internal integer key of a record)
    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]: ...
    def backlog(
        self, namespace: str, embedder_id: str, limit: int
    ) -> list[tuple[int, str, str]]: ...
    def backlog_count(self, namespace: str, embedder_id: str) -> int: ...
    def store_vectors(
        self, embedder_id: str, items: Sequence[tuple[int, str, np.ndarray]]
    ) -> int: ...
    def clear_vectors(self, namespace: str, embedder_id: str) -> int: ...

    # jobs (each a dict of JOB_FIELDS; ``owner`` is "host:pid" of the process running it)
    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int: ...
    def job_update(
        self, job_id: int, *, state: str, done: int, error: str | None, now: int
    ) -> None: ...
    def jobs(
        self,
        namespace: str | None = None,
        *,
        state: str | None = None,
        job_id: int | None = None,
        last: int | None = None,
    ) -> list[dict[str, Any]]: ...

    # tokens
    def token_create(self, token: Token) -> None: ...
    def tokens(self) -> list[Token]: ...
    def token_by_digest(self, token_digest: str) -> Token | None: ...
    def token_disable(self, token_id: str) -> bool: ...

    # inspection
    def ledger(self, namespace: str | None = None) -> list[LedgerEntry]: ...
    def namespaces(self) -> list[str]: ...

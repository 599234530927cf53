"""The PostgreSQL store: records, versions and ledger in tables, tsvector + GIN for
the lexical lane, pgvector (HNSW, iterative scans) for the vector lane.

It implements the Store protocol with SQLite's semantics — the same records,
versions, ledger entries, errors, orderings and ties — so one conformance suite
runs on both (tests/). Scores differ in scale only: the lexical lane ranks with
``ts_rank_cd`` where SQLite uses BM25 (higher is better on both, ties by id).

Every statement names its namespace, which is what lets the tables distribute by
namespace on Citus (docs/postgres.md). The one exception is ``store_vectors``: the
protocol hands it record rowids only, so on Citus it reaches every shard.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from memstrata.domain.auth import Capability, Token
from memstrata.domain.errors import NotFound
from memstrata.domain.ledger import LedgerEntry
from memstrata.domain.records import Record
from memstrata.domain.search import ExpireRequest, SearchRequest
from memstrata.domain.time import Window, now_us
from memstrata.store import expiry
from memstrata.store.base import JOB_FIELDS, jobs_query
from memstrata.store.postgres import lexical, vectors, writes
from memstrata.store.postgres.connection import Connection, Database, connect
from memstrata.store.postgres.migrations import apply_migrations
from memstrata.store.postgres.scope import metadata_clause, scope_clause, scope_rowids
from memstrata.store.sqlite.rows import prefixed, record_from_row, record_from_snapshot

log = logging.getLogger("memstrata.store.postgres")

HISTORY_LIMIT = 1000
#: Scopes with at most this many embedded records are ranked exactly; larger ones
#: use the HNSW index (measured: bench/backends.py).
EXACT_LIMIT = 10_000


def _token(row: Sequence[Any]) -> Token:
    return Token(
        id=row[0],
        name=row[1],
        digest=row[2],
        capabilities=frozenset(Capability(c) for c in json.loads(row[3])),
        namespaces=frozenset(json.loads(row[4])),
        disabled=bool(row[5]),
        created_at=row[6],
    )


def _configure(conn: Connection) -> None:
    register_vector(conn)


class FreshStatistics:
    """ANALYZEs the tables after this process's first writes, at 500, 1,000, 2,000, …
    rows. Autovacuum gathers statistics too, but only every minute or so: a store
    loaded and searched within that minute would be planned as if its tables held
    one row each — nested loops that cost seconds at a few thousand rows."""

    TABLES = "records, record_tags, record_meta, vectors"
    FIRST = 500
    LAST = 2_000_000  # past this, autovacuum's own thresholds are what matter

    def __init__(self) -> None:
        self._written = 0
        self._due = self.FIRST
        self._lock = threading.Lock()

    def wrote(self, db: Database, rows: int) -> None:
        with self._lock:
            self._written += rows
            if self._written < self._due or self._due > self.LAST:
                return
            self._due *= 2
        try:
            with db.connection() as conn:
                conn.execute(f"ANALYZE {self.TABLES}")
        except psycopg.Error as error:  # statistics help; their absence is not an error
            log.warning("ANALYZE after the first writes failed: %s", error)


class PostgresStore:
    """Implements the Store protocol on one PostgreSQL database (with pgvector ≥ 0.8).

    ``url`` is a libpq URL; its ``options=-csearch_path=…`` selects a schema."""

    backend = "postgres"

    def __init__(self, url: str, *, pool_size: int = 10, exact_limit: int = EXACT_LIMIT) -> None:
        self.url = url
        self.exact_limit = exact_limit
        with connect(url) as conn:
            apply_migrations(conn, now_us())
        self.db = Database(url, max_size=pool_size, configure=_configure)
        self._indexes = vectors.VectorIndexes()
        self._statistics = FreshStatistics()

    def close(self) -> None:
        self.db.close()

    # -- writes ---------------------------------------------------------------

    def upsert(
        self,
        namespace: str,
        records: Sequence[Record],
        *,
        now: int,
        actor: str,
        embedder_id: str | None = None,
    ) -> list[tuple[str, int]]:
        written = self.db.write(
            lambda conn: writes.upsert_many(
                conn, namespace, records, now=now, actor=actor, embedder_id=embedder_id
            ),
            pipeline=True,
        )
        self._statistics.wrote(self.db, len(records))
        return written

    def invalidate(self, namespace: str, record_id: str, at: int, *, now: int, actor: str) -> int:
        return self.db.write(
            lambda conn: writes.invalidate(conn, namespace, record_id, at, now=now, actor=actor),
            pipeline=True,
        )

    def delete(self, namespace: str, record_id: str, *, hard: bool, now: int, actor: str) -> None:
        remove = writes.hard_delete if hard else writes.soft_delete
        self.db.write(
            lambda conn: remove(conn, namespace, record_id, now=now, actor=actor), pipeline=True
        )

    def verify(self, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str) -> int:
        return self.db.write(
            lambda conn: writes.verify(conn, namespace, record_id, reviewer, now=now, actor=actor),
            pipeline=True,
        )

    def expire(self, namespace: str, request: ExpireRequest, *, now: int, actor: str) -> int:
        """Applies the action to at most ``max_rows`` matching records, oldest first."""
        clauses, params = metadata_clause("r", request.filter, request.predicates, request.tags)
        action_terms, action_params = expiry.candidates(request, now, "%s")
        where = ["r.namespace = %s", *clauses, *action_terms]
        params = [namespace, *params, *action_params]

        def work(conn: Connection) -> int:
            ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT r.id FROM records r WHERE {' AND '.join(where)}"
                    " ORDER BY r.rowid LIMIT %s FOR UPDATE",
                    [*params, request.max_rows],
                )
            ]
            return expiry.apply(writes, conn, namespace, ids, request.action, now=now, actor=actor)

        return self.db.write(work, pipeline=True)

    def set_embedding(
        self,
        namespace: str,
        record_id: str,
        embedder_id: str,
        vector: np.ndarray,
        *,
        now: int,
        actor: str,
    ) -> None:
        def work(conn: Connection) -> None:
            rowid, record = writes.require(conn, namespace, record_id)
            writes.store_vector(conn, namespace, rowid, embedder_id, vector)
            writes.ledger(conn, at=now, op="set_embedding", namespace=namespace,
                          record_id=record_id, version=record.version, actor=actor,
                          detail={"embedder_id": embedder_id})  # fmt: skip

        self.db.write(work, pipeline=True)

    # -- reads ----------------------------------------------------------------

    def get(self, namespace: str, record_id: str, version: int | None = None) -> Record:
        with self.db.connection() as conn:
            if version is None:
                found = writes.lookup(conn, namespace, record_id, lock=False)
                if found is None:
                    raise NotFound(
                        f"record {record_id!r} does not exist in namespace {namespace!r}"
                    )
                return found[1]
            row = conn.execute(
                "SELECT body, payload FROM record_versions WHERE namespace = %s AND id = %s"
                " AND version = %s",
                (namespace, record_id, version),
            ).fetchone()
        if row is None:
            raise NotFound(
                f"record {record_id!r} has no version {version} in namespace {namespace!r}"
            )
        return record_from_snapshot(row[0], row[1])

    def versions(self, namespace: str, record_id: str) -> list[int]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT version FROM record_versions WHERE namespace = %s AND id = %s"
                " ORDER BY version",
                (namespace, record_id),
            ).fetchall()
        return [row[0] for row in rows]

    def history(self, namespace: str, record_id: str) -> list[Record]:
        """Every record of the chain through ``record_id``, oldest first. The walk
        remembers where it has been and stops at missing links."""
        with self.db.snapshot() as conn:
            found = writes.lookup(conn, namespace, record_id, lock=False)
            if found is None:
                raise NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")
            chain: dict[str, Record] = {record_id: found[1]}
            frontier = [found[1]]
            while frontier and len(chain) < HISTORY_LIMIT:
                record = frontier.pop()
                links = list(record.supersedes)
                if record.superseded_by:
                    links.append(record.superseded_by)
                for link in links:
                    if link in chain:
                        continue
                    linked = writes.lookup(conn, namespace, link, lock=False)
                    if linked is not None:
                        chain[link] = linked[1]
                        frontier.append(linked[1])
        return sorted(chain.values(), key=lambda r: (r.valid_from, r.created_at, r.version, r.id))

    def lexical(
        self, namespace: str, request: SearchRequest, window: Window | None, limit: int
    ) -> list[tuple[Record, float]]:
        """ts_rank_cd over the content's tokens within the scope; higher scores are
        better, ties by id."""
        match = lexical.query_literal(request.query or "")
        if match is None:
            return []
        where, params = scope_clause("r", namespace, request, window)
        with self.db.connection() as conn:
            rows = conn.execute(
                f"SELECT {prefixed('r')}, ts_rank_cd(r.tsv, %s::tsquery) AS rank FROM records r"
                f" WHERE r.tsv @@ %s::tsquery AND {where} ORDER BY rank DESC, r.id LIMIT %s",
                [match, match, *params, limit],
            ).fetchall()
        return [
            (record_from_row(row, with_payload=request.include_payload), float(row[-1]))
            for row in rows
        ]

    def semantic(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> tuple[list[tuple[Record, float]], int]:
        """Cosine over the in-scope records that have a vector for ``embedder_id``:
        exact for scopes up to ``exact_limit``, the HNSW index beyond (see vectors.py).

        Returns the best ``limit`` hits (ties by id) and how many in-scope records had
        no vector yet (``unembedded``)."""
        query = np.asarray(query, dtype=np.float32)
        dimensions = int(query.shape[0])
        scope, scope_params = scope_rowids(namespace, request, window)
        build = False
        rows: list[tuple[Any, ...]] = []
        with self.db.snapshot() as conn:
            total, embedded, chosen = vectors.exact(
                conn, namespace, scope, scope_params, embedder_id, query, limit,
                scope_limit=self.exact_limit,
            )  # fmt: skip
            if total > self.exact_limit:
                # a large scope: the index answers if enough of it is embedded
                counted = conn.execute(
                    f"SELECT count(*), count(v.record) FROM ({scope}) s LEFT JOIN vectors v"
                    " ON v.namespace = %s AND v.record = s.record AND v.embedder_id = %s"
                    " AND v.dimensions = %s",
                    [*scope_params, namespace, embedder_id, dimensions],
                ).fetchone()
                total, embedded = (int(counted[0]), int(counted[1])) if counted else (0, 0)
                if embedded == 0:
                    return [], total
                indexed = embedded > self.exact_limit and vectors.index_type(dimensions) is not None
                if indexed and not self._indexes.ready(conn, dimensions):
                    build = True  # outside this transaction: a concurrent build waits for it
                elif indexed:
                    found = self._approximate(conn, namespace, request, window, embedder_id,
                                              query, limit)  # fmt: skip
                    if found is not None and len(found) >= min(limit, embedded):
                        return self._hits(found[:limit], request), total - embedded
                if not build:  # no index, or it ran out before the scope did: rank exactly
                    total, embedded, chosen = vectors.exact(
                        conn, namespace, scope, scope_params, embedder_id, query, limit
                    )
            if not build:
                rows = conn.execute(
                    f"SELECT {prefixed('r')} FROM records r WHERE r.namespace = %s"
                    " AND r.rowid = ANY (%s)",
                    [namespace, list(chosen)],
                ).fetchall()
        if build:
            self._indexes.ensure(self.db, dimensions)
            return self.semantic(namespace, request, window, embedder_id, query, limit)
        hits = [
            (record_from_row(row, with_payload=request.include_payload), chosen[row[0]])
            for row in rows
        ]
        hits.sort(key=lambda hit: (-hit[1], hit[0].id))
        return hits[:limit], total - embedded

    def _approximate(
        self,
        conn: Connection,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> list[tuple[Any, ...]] | None:
        """The HNSW lane's rows (record columns, then similarity), best first."""
        where, params = scope_clause("r", namespace, request, window)
        # the relaxed scan's first rows are not always the nearest: read twice as
        # many, keep the best (recall 0.87 -> 0.91 at 100k, bench/backends.py)
        return vectors.approximate(
            conn, namespace, prefixed("r"), where, params, embedder_id, query, 2 * limit,
            ef_search=min(1000, max(100, 2 * limit)),
        )  # fmt: skip

    @staticmethod
    def _hits(rows: list[tuple[Any, ...]], request: SearchRequest) -> list[tuple[Record, float]]:
        return [
            (record_from_row(row, with_payload=request.include_payload), float(row[-1]))
            for row in rows
        ]

    def build_vector_index(self, dimensions: int) -> None:
        """Builds the HNSW index of one vector dimension now (a search builds it when
        it first needs it; after a bulk load an operator may build it ahead)."""
        self._indexes.ensure(self.db, dimensions)

    # -- derived vectors ----------------------------------------------------------

    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        if not ids:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT r.id, v.embedding FROM records r JOIN vectors v"
                " ON v.namespace = r.namespace AND v.record = r.rowid"
                " WHERE r.namespace = %s AND v.embedder_id = %s AND r.id = ANY (%s)",
                (namespace, embedder_id, list(ids)),
            ).fetchall()
        return {row[0]: row[1].to_numpy().astype(np.float32).tolist() for row in rows}

    def backlog(self, namespace: str, embedder_id: str, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` records with no vector for ``embedder_id``: (rowid, hash, content)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT r.rowid, r.content_hash, r.content FROM records r WHERE r.namespace = %s"
                " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.namespace = r.namespace"
                " AND v.record = r.rowid AND v.embedder_id = %s) ORDER BY r.rowid LIMIT %s",
                (namespace, embedder_id, limit),
            ).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def backlog_count(self, namespace: str, embedder_id: str) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM records r WHERE r.namespace = %s AND NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.namespace = r.namespace"
                " AND v.record = r.rowid AND v.embedder_id = %s)",
                (namespace, embedder_id),
            ).fetchone()
        return int(row[0]) if row else 0

    def store_vectors(self, embedder_id: str, items: Sequence[tuple[int, str, np.ndarray]]) -> int:
        """Stores derived vectors for (rowid, content_hash) pairs whose content is still
        that hash — a record rewritten meanwhile is left for the next pass. Touches no
        record. Returns how many were stored."""
        if not items:
            return 0

        def work(conn: Connection) -> int:
            current = {
                row[0]: (row[1], row[2])
                for row in conn.execute(
                    "SELECT rowid, namespace, content_hash FROM records WHERE rowid = ANY (%s)"
                    " FOR SHARE",
                    ([rowid for rowid, _, _ in items],),
                )
            }
            stored = 0
            for rowid, content_hash, vector in items:
                found = current.get(rowid)
                if found is not None and found[1] == content_hash:
                    writes.store_vector(conn, found[0], rowid, embedder_id, vector)
                    stored += 1
            return stored

        stored = self.db.write(work, pipeline=True)
        self._statistics.wrote(self.db, stored)
        return stored

    def clear_vectors(self, namespace: str, embedder_id: str) -> int:
        """Drops a namespace's vectors for ``embedder_id`` (reindex makes them a backlog)."""
        return self.db.write(
            lambda conn: (
                conn.execute(
                    "DELETE FROM vectors WHERE namespace = %s AND embedder_id = %s",
                    (namespace, embedder_id),
                ).rowcount
            )
        )

    # -- jobs ---------------------------------------------------------------------

    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO jobs (type, namespace, state, created_at, updated_at, owner)"
                " VALUES (%s, %s, 'running', %s, %s, %s) RETURNING id",
                (job_type, namespace, now, now, owner),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def job_update(
        self, job_id: int, *, state: str, done: int, error: str | None, now: int
    ) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE jobs SET state = %s, done = %s, error = %s, updated_at = %s WHERE id = %s",
                (state, done, error, now, job_id),
            )

    def jobs(
        self,
        namespace: str | None = None,
        *,
        state: str | None = None,
        job_id: int | None = None,
        last: int | None = None,
    ) -> list[dict[str, Any]]:
        sql, params = jobs_query("%s", namespace, state=state, job_id=job_id, last=last)
        with self.db.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [dict(zip(JOB_FIELDS, row, strict=True)) for row in rows]

    # -- tokens -------------------------------------------------------------------

    def token_create(self, token: Token) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO tokens (id, name, digest, capabilities, namespaces, disabled,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (token.id, token.name, token.digest,
                 json.dumps(sorted(c.value for c in token.capabilities)),
                 json.dumps(sorted(token.namespaces)), token.disabled, token.created_at),
            )  # fmt: skip

    def tokens(self) -> list[Token]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT id, name, digest, capabilities, namespaces, disabled, created_at"
                " FROM tokens ORDER BY created_at, id"
            ).fetchall()
        return [_token(row) for row in rows]

    def token_by_digest(self, token_digest: str) -> Token | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id, name, digest, capabilities, namespaces, disabled, created_at"
                " FROM tokens WHERE digest = %s",
                (token_digest,),
            ).fetchone()
        return _token(row) if row else None

    def token_disable(self, token_id: str) -> bool:
        with self.db.connection() as conn:
            cursor = conn.execute("UPDATE tokens SET disabled = true WHERE id = %s", (token_id,))
            return cursor.rowcount > 0

    # -- inspection -------------------------------------------------------------

    def ledger(self, namespace: str | None = None) -> list[LedgerEntry]:
        sql = "SELECT seq, at, op, namespace, record_id, version, actor, detail FROM ledger"
        params: list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = %s"
            params.append(namespace)
        with self.db.connection() as conn:
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [LedgerEntry(*row) for row in rows]

    def namespaces(self) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT name FROM namespaces ORDER BY name").fetchall()
        return [row[0] for row in rows]

"""The SQLite store: one file, WAL, FTS5 for the lexical lane, vectors beside records."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from memstrata.domain.auth import Capability, Token
from memstrata.domain.errors import NotFound
from memstrata.domain.ledger import LedgerEntry
from memstrata.domain.records import Record
from memstrata.domain.search import ExpireRequest, SearchRequest, query_words
from memstrata.domain.time import Window, now_us
from memstrata.store import expiry
from memstrata.store.base import JOB_FIELDS, jobs_query
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import Database
from memstrata.store.sqlite.migrations import apply_migrations
from memstrata.store.sqlite.rows import (
    COLUMNS,
    prefixed,
    record_from_row,
    record_from_snapshot,
)
from memstrata.store.sqlite.scope import metadata_clause, scope_clause, scope_rowids
from memstrata.store.sqlite.vectors import VectorCache, top_k

HISTORY_LIMIT = 1000


def fts_query(text: str) -> str | None:
    """Plain words OR-ed together, each quoted: FTS5 syntax in a query is just text."""
    words = query_words(text)
    return " OR ".join('"' + word + '"' for word in words) if words else None


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


class SqliteStore:
    """Implements the Store protocol on one SQLite file."""

    backend = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self.db = Database(path)
        self._vectors = VectorCache()
        apply_migrations(self.db.conn(), now_us())

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
        with self.db.atomic() as conn:
            return writes.upsert_many(
                conn, namespace, records, now=now, actor=actor, embedder_id=embedder_id
            )

    def invalidate(self, namespace: str, record_id: str, at: int, *, now: int, actor: str) -> int:
        with self.db.atomic() as conn:
            return writes.invalidate(conn, namespace, record_id, at, now=now, actor=actor)

    def delete(self, namespace: str, record_id: str, *, hard: bool, now: int, actor: str) -> None:
        with self.db.atomic() as conn:
            if hard:
                writes.hard_delete(conn, namespace, record_id, now=now, actor=actor)
            else:
                writes.soft_delete(conn, namespace, record_id, now=now, actor=actor)

    def verify(self, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str) -> int:
        with self.db.atomic() as conn:
            return writes.verify(conn, namespace, record_id, reviewer, now=now, actor=actor)

    def expire(self, namespace: str, request: ExpireRequest, *, now: int, actor: str) -> int:
        """Applies the action to at most ``max_rows`` matching records, oldest first."""
        clauses, params = metadata_clause(
            "r.rowid", namespace, request.filter, request.predicates, request.tags
        )
        action_terms, action_params = expiry.candidates(request, now, "?")
        where = ["r.namespace = ?", *clauses, *action_terms]
        params = [namespace, *params, *action_params]
        with self.db.atomic() as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT r.id FROM records r WHERE {' AND '.join(where)}"
                    " ORDER BY r.rowid LIMIT ?",
                    [*params, request.max_rows],
                )
            ]
            return expiry.apply(writes, conn, namespace, ids, request.action, now=now, actor=actor)

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
        with self.db.atomic() as conn:
            rowid, record = writes.require(conn, namespace, record_id)
            writes.store_vector(conn, rowid, embedder_id, vector)
            writes.ledger(conn, at=now, op="set_embedding", namespace=namespace,
                          record_id=record_id, version=record.version, actor=actor,
                          detail={"embedder_id": embedder_id})  # fmt: skip

    # -- reads ----------------------------------------------------------------

    def get(self, namespace: str, record_id: str, version: int | None = None) -> Record:
        conn = self.db.conn()
        if version is None:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM records WHERE namespace = ? AND id = ?",
                (namespace, record_id),
            ).fetchone()
            if row is None:
                raise NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")
            return record_from_row(row)
        row = conn.execute(
            "SELECT body, payload FROM record_versions WHERE namespace = ? AND id = ?"
            " AND version = ?",
            (namespace, record_id, version),
        ).fetchone()
        if row is None:
            raise NotFound(
                f"record {record_id!r} has no version {version} in namespace {namespace!r}"
            )
        return record_from_snapshot(row[0], row[1])

    def versions(self, namespace: str, record_id: str) -> list[int]:
        rows = self.db.conn().execute(
            "SELECT version FROM record_versions WHERE namespace = ? AND id = ? ORDER BY version",
            (namespace, record_id),
        )
        return [row[0] for row in rows]

    def history(self, namespace: str, record_id: str) -> list[Record]:
        """Every record of the chain through ``record_id``, oldest first. The walk
        remembers where it has been and stops at missing links."""
        with self.db.snapshot() as conn:
            found = writes.lookup(conn, namespace, record_id)
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
                    linked = writes.lookup(conn, namespace, link)
                    if linked is not None:
                        chain[link] = linked[1]
                        frontier.append(linked[1])
        return sorted(chain.values(), key=lambda r: (r.valid_from, r.created_at, r.version, r.id))

    def lexical(
        self, namespace: str, request: SearchRequest, window: Window | None, limit: int
    ) -> list[tuple[Record, float]]:
        """BM25 over content within the scope; higher scores are better, ties by id."""
        match = fts_query(request.query or "")
        if match is None:
            return []
        where, params = scope_clause("r", namespace, request, window)
        rows = self.db.conn().execute(
            f"SELECT {prefixed('r')}, bm25(records_fts) AS rank FROM records_fts"
            f" JOIN records r ON r.rowid = records_fts.rowid"
            f" WHERE records_fts MATCH ? AND {where} ORDER BY rank, r.id LIMIT ?",
            [match, *params, limit],
        )
        return [
            (record_from_row(row, with_payload=request.include_payload), -float(row[-1]))
            for row in rows
        ]

    @staticmethod
    def in_scope(
        conn: sqlite3.Connection, namespace: str, request: SearchRequest, window: Window | None
    ) -> np.ndarray:
        """The rowids of every record in the search's scope, as one numpy array."""
        select, params = scope_rowids(namespace, request, window)
        # One text value instead of a row per record: handing thousands of rows to
        # Python costs more than finding them.
        (listed,) = conn.execute(
            f"SELECT group_concat(s.record) FROM ({select}) s", params
        ).fetchone()
        if listed is None:
            return np.zeros(0, dtype=np.int64)
        return np.fromstring(listed, dtype=np.int64, sep=",")

    def semantic(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> tuple[list[tuple[Record, float]], int]:
        """Exact cosine over the in-scope records that have a vector for ``embedder_id``.

        Returns the best ``limit`` hits (ties by id) and how many in-scope records had
        no vector yet (``unembedded``)."""
        with self.db.snapshot() as conn:
            in_scope = self.in_scope(conn, namespace, request, window)
            if in_scope.shape[0] == 0:
                return [], 0
            # The cache, refreshed inside this read, knows which records have a vector.
            matrix = self._vectors.refresh(conn, embedder_id, int(query.shape[0]))
            rowids = in_scope[matrix.has(in_scope)]
            unembedded = int(in_scope.shape[0] - rowids.shape[0])
            if rowids.shape[0] == 0:
                return [], unembedded
            similarities = matrix.scores(rowids, query.astype(np.float32))
            chosen = top_k(similarities, limit)
            by_rowid = {int(rowids[i]): float(similarities[i]) for i in chosen}
            marks = ", ".join("?" for _ in by_rowid)
            records = conn.execute(
                f"SELECT {COLUMNS} FROM records WHERE rowid IN ({marks})", list(by_rowid)
            ).fetchall()
        hits = [
            (record_from_row(row, with_payload=request.include_payload), by_rowid[row[0]])
            for row in records
        ]
        hits.sort(key=lambda hit: (-hit[1], hit[0].id))
        return hits[:limit], unembedded

    # -- derived vectors ----------------------------------------------------------

    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = self.db.conn().execute(
            f"SELECT r.id, v.vector FROM records r JOIN vectors v ON v.record = r.rowid"
            f" WHERE r.namespace = ? AND v.embedder_id = ? AND v.dimensions > 0"
            f" AND r.id IN ({marks})",
            [namespace, embedder_id, *ids],
        )
        return {row[0]: np.frombuffer(row[1], dtype="<f4").tolist() for row in rows}

    def backlog(self, namespace: str, embedder_id: str, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` records with no vector for ``embedder_id``: (rowid, hash, content)."""
        return [
            (row[0], row[1], row[2])
            for row in self.db.conn().execute(
                "SELECT r.rowid, r.content_hash, r.content FROM records r WHERE r.namespace = ?"
                " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.record = r.rowid"
                " AND v.embedder_id = ? AND v.dimensions > 0) ORDER BY r.rowid LIMIT ?",
                (namespace, embedder_id, limit),
            )
        ]

    def backlog_count(self, namespace: str, embedder_id: str) -> int:
        row = (
            self.db.conn()
            .execute(
                "SELECT count(*) FROM records r WHERE r.namespace = ? AND NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.record = r.rowid AND v.embedder_id = ?"
                " AND v.dimensions > 0)",
                (namespace, embedder_id),
            )
            .fetchone()
        )
        return int(row[0])

    def store_vectors(self, embedder_id: str, items: Sequence[tuple[int, str, np.ndarray]]) -> int:
        """Stores derived vectors for (rowid, content_hash) pairs whose content is still
        that hash — a record rewritten meanwhile is left for the next pass. Touches no
        record. Returns how many were stored."""
        stored = 0
        with self.db.atomic() as conn:
            for rowid, content_hash, vector in items:
                row = conn.execute(
                    "SELECT content_hash FROM records WHERE rowid = ?", (rowid,)
                ).fetchone()
                if row is not None and row[0] == content_hash:
                    writes.store_vector(conn, rowid, embedder_id, vector)
                    stored += 1
        return stored

    def clear_vectors(self, namespace: str, embedder_id: str) -> int:
        """Drops a namespace's vectors for ``embedder_id`` (reindex makes them a backlog)."""
        with self.db.atomic() as conn:
            return writes.withdraw_vectors(
                conn,
                "embedder_id = ? AND record IN (SELECT rowid FROM records WHERE namespace = ?)",
                [embedder_id, namespace],
            )

    # -- jobs ---------------------------------------------------------------------

    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int:
        with self.db.atomic() as conn:
            cursor = conn.execute(
                "INSERT INTO jobs (type, namespace, state, created_at, updated_at, owner)"
                " VALUES (?, ?, 'running', ?, ?, ?)",
                (job_type, namespace, now, now, owner),
            )
            return int(cursor.lastrowid or 0)

    def job_update(
        self, job_id: int, *, state: str, done: int, error: str | None, now: int
    ) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                "UPDATE jobs SET state = ?, done = ?, error = ?, updated_at = ? WHERE id = ?",
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
        sql, params = jobs_query("?", namespace, state=state, job_id=job_id, last=last)
        rows = self.db.conn().execute(sql, params)
        return [dict(zip(JOB_FIELDS, row, strict=True)) for row in rows]

    def token_create(self, token: Token) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                "INSERT INTO tokens (id, name, digest, capabilities, namespaces, disabled,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (token.id, token.name, token.digest,
                 json.dumps(sorted(c.value for c in token.capabilities)),
                 json.dumps(sorted(token.namespaces)), int(token.disabled), token.created_at),
            )  # fmt: skip

    def tokens(self) -> list[Token]:
        rows = self.db.conn().execute(
            "SELECT id, name, digest, capabilities, namespaces, disabled, created_at"
            " FROM tokens ORDER BY created_at, id"
        )
        return [_token(row) for row in rows]

    def token_by_digest(self, token_digest: str) -> Token | None:
        row = (
            self.db.conn()
            .execute(
                "SELECT id, name, digest, capabilities, namespaces, disabled, created_at"
                " FROM tokens WHERE digest = ?",
                (token_digest,),
            )
            .fetchone()
        )
        return _token(row) if row else None

    def token_disable(self, token_id: str) -> bool:
        with self.db.atomic() as conn:
            cursor = conn.execute("UPDATE tokens SET disabled = 1 WHERE id = ?", (token_id,))
            return cursor.rowcount > 0

    # -- inspection -------------------------------------------------------------

    def ledger(self, namespace: str | None = None) -> list[LedgerEntry]:
        sql = "SELECT seq, at, op, namespace, record_id, version, actor, detail FROM ledger"
        params: list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        return [LedgerEntry(*row) for row in self.db.conn().execute(sql + " ORDER BY seq", params)]

    def namespaces(self) -> list[str]:
        return [
            row[0] for row in self.db.conn().execute("SELECT name FROM namespaces ORDER BY name")
        ]

    def raw(self) -> sqlite3.Connection:
        """The calling thread's connection, for tests and diagnostics."""
        return self.db.conn()

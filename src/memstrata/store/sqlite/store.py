"""The SQLite store: one file, WAL, FTS5 for the lexical lane, vectors beside records."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memstrata.domain.errors import NotFound
from memstrata.domain.records import Record
from memstrata.domain.search import ExpireAction, ExpireRequest, SearchRequest, query_words
from memstrata.domain.time import Window, now_us
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import Database
from memstrata.store.sqlite.migrations import apply_migrations
from memstrata.store.sqlite.rows import (
    COLUMNS,
    prefixed,
    record_from_row,
    record_from_snapshot,
)
from memstrata.store.sqlite.scope import metadata_clause, scope_clause

HISTORY_LIMIT = 1000


def fts_query(text: str) -> str | None:
    """Plain words OR-ed together, each quoted: FTS5 syntax in a query is just text."""
    words = query_words(text)
    return " OR ".join('"' + word + '"' for word in words) if words else None


@dataclass(frozen=True)
class LedgerEntry:
    seq: int
    at: int
    op: str
    namespace: str
    record_id: str
    version: int | None
    actor: str
    detail: str | None


class SqliteStore:
    """Implements the Store protocol on one SQLite file."""

    backend = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self.db = Database(path)
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
        clauses, params = metadata_clause("r", request.filter, request.predicates)
        where = ["r.namespace = ?", *clauses]
        params = [namespace, *params]
        if request.action == ExpireAction.INVALIDATE:
            where.append(
                "r.deleted_at IS NULL AND r.superseded_by IS NULL AND r.valid_from < ?"
                " AND (r.valid_to IS NULL OR r.valid_to > ?)"
            )
            params += [now, now]
        elif request.action == ExpireAction.SOFT_DELETE:
            where.append("r.deleted_at IS NULL")
        with self.db.atomic() as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT r.id FROM records r WHERE {' AND '.join(where)}"
                    " ORDER BY r.rowid LIMIT ?",
                    [*params, request.max_rows],
                )
            ]
            for record_id in ids:
                if request.action == ExpireAction.INVALIDATE:
                    writes.invalidate(conn, namespace, record_id, now, now=now, actor=actor)
                elif request.action == ExpireAction.SOFT_DELETE:
                    writes.soft_delete(conn, namespace, record_id, now=now, actor=actor)
                else:
                    writes.hard_delete(conn, namespace, record_id, now=now, actor=actor)
            return len(ids)

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

    def count_in_scope(self, namespace: str, request: SearchRequest, window: Window | None) -> int:
        where, params = scope_clause("r", namespace, request, window)
        row = self.db.conn().execute(f"SELECT count(*) FROM records r WHERE {where}", params)
        return int(row.fetchone()[0])

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

"""PostgreSQL's change tracking (migration m009): each row of ``records`` and
``vectors`` carries the transaction that last wrote it, and a hard delete leaves the
keys of its rows in a drop log, so a process can learn what changed since a snapshot
(the scope copy, :mod:`erstwhile.store.postgres.scope_copy`, relies on it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from tests.support.pg import PgServer

import erstwhile
from erstwhile.embedding import HashEmbedder


@pytest.fixture
def pg_target(postgres_server: PgServer) -> Iterator[str]:
    target = postgres_server.new_target()
    yield target
    postgres_server.drop_target(target)


def rows(target: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(target, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def test_writes_stamp_their_transaction_and_hard_deletes_are_logged(pg_target: str) -> None:
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=8),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"id": f"r{i}", "content": f"text {i}"} for i in range(5)])
        m.upsert("other", [{"id": "o", "content": "elsewhere"}])
        first = dict(rows(pg_target, "SELECT id, xid::text::bigint FROM records"))
        assert len(set(first.values())) == 2  # one transaction per upsert call
        vectors = rows(
            pg_target,
            "SELECT r.id, v.xid::text::bigint FROM vectors v"
            " JOIN records r ON r.namespace = v.namespace AND r.rowid = v.record",
        )
        assert dict(vectors) == first  # written in the same transaction as its record
        m.upsert("ns", [{"id": "r1", "content": "text 1 changed"}])  # an UPDATE of r1
        m.delete("ns", "r2")  # a tombstone: an UPDATE too
        after = dict(rows(pg_target, "SELECT id, xid::text::bigint FROM records"))
        assert after["r1"] > first["r1"] and after["r2"] > after["r1"]
        assert {k: v for k, v in after.items() if k not in ("r1", "r2")} == {
            k: v for k, v in first.items() if k not in ("r1", "r2")
        }
        (vector_xid,) = rows(pg_target, "SELECT v.xid::text::bigint FROM vectors v JOIN records r"
                             " ON r.namespace = v.namespace AND r.rowid = v.record"
                             " WHERE r.id = 'r1'")[0]  # fmt: skip
        assert vector_xid == after["r1"]  # re-embedded: the upsert's update stamped it
        rowid = rows(pg_target, "SELECT rowid FROM records WHERE id = 'r3'")[0][0]
        changed = rows(pg_target, "SELECT rowid FROM records WHERE id = 'r1'")[0][0]
        assert rows(pg_target, "SELECT count(*) FROM record_drops")[0][0] == 0
        m.delete("ns", "r3", hard=True)
        drops = rows(pg_target, "SELECT namespace, record, xid::text::bigint FROM record_drops")
        assert [(ns, rec) for ns, rec, _ in drops] == [("ns", rowid)]
        assert drops[0][2] > after["r2"]
        vector_drops = rows(pg_target, "SELECT namespace, record, embedder_id FROM vector_drops")
        # the new content withdrew r1's old vector (a DELETE of it), the hard delete r3's
        assert sorted((ns, rec) for ns, rec, _ in vector_drops) == [("ns", changed), ("ns", rowid)]


def test_old_drops_are_pruned_and_the_horizon_says_so(pg_target: str) -> None:
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=8),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"id": f"r{i}", "content": f"text {i}"} for i in range(4)])
        m.upsert("b", [{"id": f"b{i}", "content": f"text {i}"} for i in range(2)])
        m.delete("ns", "r0", hard=True)
        m.delete("b", "b0", hard=True)
        old = rows(pg_target, "SELECT xid::text::bigint FROM record_drops WHERE namespace = 'ns'")
        rows(pg_target, "UPDATE record_drops SET dropped_at = now() - interval '2 hours'")
        rows(pg_target, "UPDATE vector_drops SET dropped_at = now() - interval '2 hours'")
        assert rows(pg_target, "SELECT count(*) FROM drop_horizon")[0][0] == 0
        m.delete("ns", "r1", hard=True)  # prunes the namespace it touches, only that one
        left = rows(pg_target, "SELECT namespace, count(*) FROM record_drops GROUP BY 1 ORDER BY 1")
        assert left == [("b", 1), ("ns", 1)]
        horizon = rows(pg_target, "SELECT namespace, below::text::bigint FROM drop_horizon")
        assert horizon == [("ns", old[0][0])]
        assert rows(pg_target, "SELECT namespace, count(*) FROM vector_drops GROUP BY 1"
                    " ORDER BY 1") == [("b", 1), ("ns", 1)]  # fmt: skip


def test_rows_written_before_the_migration_have_no_xid(pg_target: str) -> None:
    """The column is added without a rewrite: old rows read NULL (older than any
    snapshot), new rows and updated ones carry their transaction."""
    with erstwhile.open(pg_target, embedder="none", background_jobs=False) as m:
        m.upsert("ns", [{"id": "a", "content": "one"}])
    with psycopg.connect(pg_target, autocommit=True) as conn:
        conn.execute("ALTER TABLE records DISABLE TRIGGER records_stamp_xid")
        conn.execute("UPDATE records SET xid = NULL")  # as a store migrated from m008 has
        assert conn.execute("SELECT xid FROM records").fetchone() == (None,)
        conn.execute("ALTER TABLE records ENABLE TRIGGER records_stamp_xid")
        conn.execute("UPDATE records SET xid = NULL, content = content")  # the trigger wins
        assert conn.execute("SELECT xid IS NOT NULL FROM records").fetchone() == (True,)

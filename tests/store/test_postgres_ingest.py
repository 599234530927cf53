"""PostgreSQL's write path: the statistics a write makes due past the first ones are
gathered on a thread of their own (the write does not wait for them), vectors go
to the server already in pgvector's binary form, read back bit for bit, and a hard
delete takes the rows that have no foreign key to their record (m010)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest
from tests.support import pg

import erstwhile
from erstwhile.store.postgres.dialect import FreshStatistics, packed


@pytest.fixture
def target(postgres_server: pg.PgServer) -> Iterator[str]:
    url = postgres_server.new_target()
    yield url
    postgres_server.drop_target(url)


def _records(start: int, count: int) -> list[dict[str, object]]:
    return [{"id": f"r{i}", "content": f"note {i}"} for i in range(start, start + count)]


def _estimated_rows(conn: psycopg.Connection[object]) -> float:
    """What the last ANALYZE of ``records`` counted (it reads every row of so few)."""
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'records'::regclass").fetchone()
    assert row is not None
    return float(row[0])


def test_the_first_statistics_cover_what_plans_read(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """records' tested columns and the scope tables get statistics; the free text of
    records and the documents (read by key only) are left to autovacuum."""
    monkeypatch.setattr(FreshStatistics, "FIRST", 10)
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        m.upsert("ns", [{**r, "metadata": {"room": "a"}, "tags": ["t"]} for r in _records(0, 10)])
    with psycopg.connect(target) as conn:
        rows = conn.execute(
            "SELECT tablename, attname FROM pg_stats WHERE schemaname = current_schema()"
        ).fetchall()
    analyzed = {(table, column) for table, column in rows}
    for column in ("namespace", "id", "valid_from", "valid_to", "deleted_at", "kind", "trust"):
        assert ("records", column) in analyzed
    assert not {("records", "content"), ("records", "metadata"), ("records", "payload")} & analyzed
    assert {"record_tags", "record_meta", "lexical_postings", "lexical_terms"} <= {
        table for table, _ in analyzed
    }
    assert "lexical_docs" not in {table for table, _ in analyzed}


def test_a_write_does_not_wait_for_the_statistics_it_made_due(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FreshStatistics, "FIRST", 10)
    monkeypatch.setattr(FreshStatistics, "BACKGROUND_FROM", 20)
    m = erstwhile.open(target, embedder="none", background_jobs=False)
    blocker = psycopg.connect(target)
    try:
        m.upsert("ns", _records(0, 10))  # the first statistics: gathered before it returns
        assert _estimated_rows(blocker) == 10
        blocker.rollback()
        # ANALYZE waits for this lock; inserts do not
        blocker.execute("LOCK TABLE records IN SHARE UPDATE EXCLUSIVE MODE")
        with ThreadPoolExecutor(1) as pool:  # a guard against a hang, not a timing
            written = pool.submit(m.upsert, "ns", _records(10, 10)).result(timeout=120)
        assert len(written.ids) == 10
        assert _estimated_rows(blocker) == 10  # not gathered yet: it waits for the lock
        blocker.rollback()  # lets it run
        m.close()  # waits for it
        assert _estimated_rows(blocker) == 20
        assert blocker.execute("SELECT count(*) FROM records").fetchone() == (20,)
    finally:
        blocker.close()
        m.close()


def test_packed_vectors_are_pgvectors_binary_form_and_read_back_exactly(target: str) -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((3, 256)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    m = erstwhile.open(target, embedder="hash", background_jobs=False)
    try:
        m.upsert("ns", [{"id": f"v{i}", "content": f"v {i}", "vector": row.tolist()}
                        for i, row in enumerate(rows)])  # fmt: skip
        embedder = m.service.embedder_for("ns")
        assert embedder is not None
        stored = m.service.store.vectors_for("ns", ["v0", "v1", "v2"], embedder.embedder_id)
    finally:
        m.close()
    for i, row in enumerate(rows):
        assert np.array_equal(np.asarray(stored[f"v{i}"], dtype=np.float32), row)
    from pgvector import Vector

    assert bytes(packed(rows[0])) == Vector(rows[0]).to_binary()


def _rows_of(url: str, rowid: int) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            table: conn.execute(
                f"SELECT count(*) FROM {table} WHERE record = %s", (rowid,)
            ).fetchone()[0]  # type: ignore[index]
            for table in ("record_tags", "record_meta", "vectors")
        }


def test_a_hard_delete_takes_the_rows_no_foreign_key_cascades_from(target: str) -> None:
    m = erstwhile.open(target, embedder="hash", background_jobs=False)
    try:
        m.upsert("ns", [{"id": i, "content": f"note {i}", "tags": ["t"], "metadata": {"a": i}}
                        for i in ("gone", "kept")])  # fmt: skip
        with psycopg.connect(target) as conn:
            rowids = dict(conn.execute("SELECT id, rowid FROM records").fetchall())
            # m010: these tables point at records without a foreign key
            assert not conn.execute(
                "SELECT conrelid::regclass FROM pg_constraint WHERE contype = 'f'"
                " AND conrelid IN ('record_tags'::regclass, 'record_meta'::regclass,"
                " 'vectors'::regclass)"
            ).fetchall()
        assert _rows_of(target, rowids["gone"]) == {"record_tags": 1, "record_meta": 1,
                                                    "vectors": 1}  # fmt: skip
        m.delete("ns", "gone", hard=True)
        assert _rows_of(target, rowids["gone"]) == {"record_tags": 0, "record_meta": 0,
                                                    "vectors": 0}  # fmt: skip
        assert _rows_of(target, rowids["kept"]) == {"record_tags": 1, "record_meta": 1,
                                                    "vectors": 1}  # fmt: skip
        assert all(finding.ok for finding in m.service.store.integrity())
        assert m.search("ns", "note", ranking="semantic").ids() == ["kept"]
        with psycopg.connect(target) as conn:  # a row of no record, written by hand
            conn.execute(
                "INSERT INTO record_meta (namespace, record, key, value, valid_from)"
                " VALUES ('ns', %s, 'a', 'x', 0)",
                (rowids["gone"],),
            )
        problems = [p for f in m.service.store.integrity() for p in f.problems]
        assert problems == ["1 rows of record_meta point at no record"]
    finally:
        m.close()

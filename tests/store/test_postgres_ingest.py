"""PostgreSQL's write path: the statistics a write makes due past the first ones are
gathered on a thread of their own (the write does not wait for them), and vectors go
to the server already in pgvector's binary form, read back bit for bit."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest
from tests.support import pg

import memstrata
from memstrata.store.postgres.dialect import FreshStatistics, packed


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


def test_a_write_does_not_wait_for_the_statistics_it_made_due(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FreshStatistics, "FIRST", 10)
    monkeypatch.setattr(FreshStatistics, "BACKGROUND_FROM", 20)
    m = memstrata.open(target, embedder="none", background_jobs=False)
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
    m = memstrata.open(target, embedder="hash", background_jobs=False)
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

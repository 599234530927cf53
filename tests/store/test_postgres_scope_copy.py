"""PostgreSQL's per-process copy of a namespace's scope and vectors
(:mod:`erstwhile.store.postgres.scope_copy`) answers exactly what the SQL lane
answers, whatever another connection or process wrote, superseded, invalidated,
tombstoned or hard-deleted in between — and sees a transaction that was in flight
when it refreshed once that transaction commits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from tests.support.pg import PgServer

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.postgres.dialect import PostgresDialect
from erstwhile.store.postgres.scope_copy import ScopeCopies
from erstwhile.store.sql.store import SqlStore

DIMENSIONS = 16


@pytest.fixture
def pg_target(postgres_server: PgServer) -> Iterator[str]:
    target = postgres_server.new_target()
    yield target
    postgres_server.drop_target(target)


def open_store(target: str) -> erstwhile.Memory:
    return erstwhile.open(target, embedder=HashEmbedder(dimensions=DIMENSIONS),
                          background_jobs=False)  # fmt: skip


def copies_of(m: erstwhile.Memory) -> ScopeCopies:
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    return store.dialect.copies


Handles = tuple[erstwhile.Memory, erstwhile.Memory, erstwhile.Memory]


@pytest.fixture
def handles(pg_target: str) -> Iterator[Handles]:
    """(searcher with the copy from its first search, searcher by SQL only, writer)."""
    warm, sql, writer = open_store(pg_target), open_store(pg_target), open_store(pg_target)
    copies_of(warm).warm_after = 1
    copies_of(sql).enabled = False
    yield warm, sql, writer
    for m in (warm, sql, writer):
        m.close()


SEARCHES: list[dict[str, Any]] = [
    {"query": "apple pear", "ranking": "semantic", "top_k": 5},
    {"query": "apple", "ranking": "semantic", "top_k": 3, "filter": {"room": "a"}},
    {"query": "plum", "ranking": "semantic", "top_k": 4, "tags": ["t1"]},
    {"query": "pear", "ranking": "hybrid", "top_k": 4, "filter": {"room": "b"}},
    {"query": "fig", "ranking": "semantic", "top_k": 6, "include_historical": True},
    {"query": "fig", "ranking": "semantic", "top_k": 6, "as_of": "2026-06-01T00:00:00Z"},
    {"query": "apple", "ranking": "semantic", "top_k": 3, "predicates": [
        {"key": "n", "op": "GT", "values": ["2"]}]},
]  # fmt: skip


def same(warm: erstwhile.Memory, sql: erstwhile.Memory, namespace: str = "ns") -> None:
    for search in SEARCHES:
        options = dict(search)
        query = options.pop("query")
        got = warm.search(namespace, query, **options)
        want = sql.search(namespace, query, **options)
        assert got.ids() == want.ids(), (search, got.ids(), want.ids())
        assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits], abs=1e-6)
        assert got.unembedded == want.unembedded


WORDS = ["apple", "pear", "plum", "fig"]
record = st.fixed_dictionaries({
    "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    "room": st.sampled_from("ab"), "tag": st.sampled_from(["t1", "t2", None]),
    "n": st.integers(0, 5), "day": st.integers(1, 300),
})  # fmt: skip
operation = st.tuples(
    st.sampled_from(["create", "rewrite", "supersede", "invalidate", "delete", "hard",
                     "vector"]),
    st.integers(0, 10**6), record, st.booleans(),
)  # fmt: skip


def write_of(record_id: str, f: dict[str, Any]) -> dict[str, Any]:
    month, day = 1 + f["day"] // 31 % 12, 1 + f["day"] % 28
    return {"id": record_id, "content": " ".join(f["words"]),
            "metadata": {"room": f["room"], "n": str(f["n"])},
            "tags": [f["tag"]] if f["tag"] else [],
            "valid_from": f"2026-{month:02d}-{day:02d}T00:00:00Z"}  # fmt: skip


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(start=st.lists(record, min_size=3, max_size=12),
       operations=st.lists(operation, min_size=1, max_size=8))  # fmt: skip
def test_the_copy_answers_what_sql_answers_after_every_kind_of_write(
    handles: Handles,
    start: list[dict[str, Any]], operations: list[tuple[str, int, dict[str, Any], bool]],
) -> None:  # fmt: skip
    warm, sql, writer = handles
    namespace = f"ns{np.random.default_rng().integers(1 << 40)}"
    ids = [f"r{i:03d}" for i in range(len(start))]
    writer.upsert(namespace, [write_of(i, f) for i, f in zip(ids, start, strict=True)])
    counter = len(ids)

    def check() -> None:
        same(warm, sql, namespace)

    check()  # builds the copy
    for kind, pick, f, through_warm in operations:
        who = warm if through_warm else writer  # the searcher's own writes, or another's
        target = ids[pick % len(ids)] if ids else None
        try:
            if kind == "create" or target is None:
                counter += 1
                ids.append(f"r{counter:03d}")
                who.upsert(namespace, [write_of(ids[-1], f)])
            elif kind == "rewrite":
                who.upsert(namespace, [write_of(target, f)])
            elif kind == "supersede":
                counter += 1
                ids.append(f"r{counter:03d}")
                who.supersede(namespace, target, write_of(ids[-1], {**f, "day": 330}))
            elif kind == "invalidate":
                who.invalidate(namespace, target, at="2026-12-01T00:00:00Z")
            elif kind == "delete":
                who.delete(namespace, target)
            elif kind == "hard":
                who.delete(namespace, target, hard=True)
                ids.remove(target)
            elif kind == "vector":
                rng = np.random.default_rng(pick)
                who.set_embedding(namespace, target, rng.standard_normal(DIMENSIONS).tolist())
        except erstwhile.ErstwhileError:
            pass  # refused (a conflict, a time out of order): nothing changed
        check()


def test_a_transaction_in_flight_at_a_refresh_is_seen_once_it_commits(
    handles: Handles, pg_target: str
) -> None:
    warm, sql, writer = handles
    writer.upsert("ns", [{"id": f"r{i}", "content": f"apple pear {i}",
                          "metadata": {"room": "a", "n": "1"}} for i in range(6)])  # fmt: skip
    same(warm, sql)
    with psycopg.connect(pg_target) as raw:  # a transaction left open
        # a tombstone as the store writes one: the record and its scope rows
        raw.execute("UPDATE records SET deleted_at = updated_at WHERE namespace = 'ns'"
                    " AND id IN ('r1', 'r2')")  # fmt: skip
        for table in ("record_meta", "record_tags"):
            raw.execute(f"UPDATE {table} t SET deleted_at = r.deleted_at FROM records r"
                        " WHERE t.namespace = 'ns' AND r.namespace = 'ns'"
                        " AND r.rowid = t.record AND r.id IN ('r1', 'r2')")  # fmt: skip
        writer.upsert("ns", [{"id": "late", "content": "apple pear late",
                              "metadata": {"room": "a", "n": "1"}}])  # fmt: skip
        same(warm, sql)  # refreshed while the UPDATE is in flight: not yet visible
        assert "r1" in warm.search("ns", "apple pear", ranking="semantic", top_k=10).ids()
        raw.commit()
    same(warm, sql)
    found = warm.search("ns", "apple pear", ranking="semantic", top_k=10).ids()
    assert "late" in found and "r1" not in found and "r2" not in found


def test_a_pruned_drop_log_reloads_the_copy_whole(handles: Handles, pg_target: str) -> None:
    warm, sql, writer = handles
    writer.upsert("ns", [{"id": f"r{i}", "content": f"apple fig {i}"} for i in range(6)])
    same(warm, sql)
    built = copies_of(warm)._copies["ns"]
    writer.delete("ns", "r0", hard=True)
    with psycopg.connect(pg_target, autocommit=True) as raw:
        raw.execute("UPDATE record_drops SET dropped_at = now() - interval '2 hours'")
        raw.execute("UPDATE vector_drops SET dropped_at = now() - interval '2 hours'")
    writer.delete("ns", "r1", hard=True)  # prunes r0's entry: the horizon moves past it
    same(warm, sql)
    assert copies_of(warm)._copies["ns"] is not built  # reloaded, not patched
    assert "r0" not in warm.search("ns", "apple fig", ranking="semantic", top_k=10).ids()
    same(warm, sql)
    assert copies_of(warm)._copies["ns"] is copies_of(warm)._copies["ns"]


def test_a_process_searching_once_or_twice_never_builds_the_copy(pg_target: str) -> None:
    with open_store(pg_target) as m:
        m.upsert("ns", [{"id": f"r{i}", "content": f"apple {i}"} for i in range(5)])
        copies = copies_of(m)
        for _ in range(2):
            m.search("ns", "apple", ranking="semantic")
        assert copies._copies == {}
        m.search("ns", "apple", ranking="semantic")
        assert list(copies._copies) == ["ns"]
        m.search("other", "apple", ranking="semantic")  # counted per namespace
        assert list(copies._copies) == ["ns"]

"""What only the PostgreSQL backend has: its HNSW lane, its migrations, its URLs.

Everything both backends share is tested once for both (the rest of tests/store and
tests/service); these cover the PostgreSQL-only machinery behind the same answers.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hypothesis.strategies as st
import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from tests.support.pg import PgServer
from tests.support.raw import dump_tables

import erstwhile
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import now_us
from erstwhile.domain.validation import parse_model
from erstwhile.embedding import HashEmbedder
from erstwhile.memory import resolve_target
from erstwhile.store import StorageOptions
from erstwhile.store.postgres import dialect as dialect_module
from erstwhile.store.postgres import vectors
from erstwhile.store.postgres.connection import Connection, with_schema
from erstwhile.store.postgres.dialect import PostgresDialect
from erstwhile.store.postgres.migrations import MIGRATIONS, pending
from erstwhile.store.sql.rows import prefixed
from erstwhile.store.sql.scope import scope_clause, scope_rowids
from erstwhile.store.sql.store import SqlStore


@pytest.fixture
def pg_target(postgres_server: PgServer) -> Iterator[str]:
    target = postgres_server.new_target()
    yield target
    postgres_server.drop_target(target)


def test_hnsw_lane_fills_top_k_from_the_scope_and_agrees_with_exact(pg_target: str) -> None:
    """Forced onto the index (exact_limit 0), a filtered search still returns top_k
    in-scope hits — the scope is applied during the index scan, not after it."""
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=64),
                        background_jobs=False) as m:  # fmt: skip
        query = "solar panel battery storage"
        near = [{"content": f"{query} {i}", "metadata": {"room": "a"}} for i in range(40)]
        far = [{"content": f"unrelated words number {i}", "metadata": {"room": "b"}}
               for i in range(15)]  # fmt: skip
        m.upsert("ns", near + far)
        store = m.service.store
        assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
        store.dialect.copies.enabled = False  # the SQL lane's HNSW branch is what is tested
        exact = m.search("ns", query, ranking="semantic", top_k=10, filter={"room": "b"})
        assert not has_index(pg_target, "vectors_hnsw_64")  # small scopes never need one
        store.dialect.exact_limit = 0  # the first search that wants the index starts it
        first = m.search("ns", query, ranking="semantic", top_k=10, filter={"room": "b"})
        assert first.ids() == exact.ids()  # answered exactly meanwhile
        deadline = time.monotonic() + 60
        while not has_index(pg_target, "vectors_hnsw_64") and time.monotonic() < deadline:
            time.sleep(0.05)  # built on the store's own thread, off the search path
        indexed = m.search("ns", query, ranking="semantic", top_k=10, filter={"room": "b"})
        assert len(indexed.hits) == 10
        assert all(h.record.metadata["room"] == "b" for h in indexed.hits)
        assert indexed.ids() == exact.ids()
        assert [h.score for h in indexed.hits] == pytest.approx([h.score for h in exact.hits])
        everything = m.search("ns", query, ranking="semantic", top_k=5)
        assert all(h.record.metadata["room"] == "a" for h in everything.hits)
    indexes = ("vectors_hnsw_64", "lexical_postings_pkey", "records_ns_live", "records_ns_created")
    for index in indexes:
        assert has_index(pg_target, index), index


def has_index(target: str, name: str) -> bool:
    with psycopg.connect(target) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid ="
            " to_regclass(quote_ident(current_schema()) || '.' || %s)",
            (name,),
        ).fetchone()
    return bool(row and row[0])


def test_the_index_scan_itself_goes_on_until_top_k_rows_pass_the_filter(pg_target: str) -> None:
    """No fallback involved: the HNSW scan alone returns top_k in-scope rows although
    the 300 nearest records (more than ef_search) are all out of scope."""
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=32),
                        background_jobs=False) as m:  # fmt: skip
        query = "wind turbine blade"
        m.upsert("ns", [{"content": f"{query} {i}", "metadata": {"room": "a"}} for i in range(300)])
        m.upsert("ns", [{"content": f"other thing {i}", "metadata": {"room": "b"}}
                        for i in range(12)])  # fmt: skip
        store = m.service.store
        assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
        store.build_vector_index(32)
        vector = m.service.embedder_for("ns").embed_query(query)  # type: ignore[union-attr]
        request = parse_model(SearchRequest, {"query_vector": vector.tolist(),
                                              "filter": {"room": "b"}})  # fmt: skip
        where, params = scope_clause(store.dialect, "r", "ns", request, request.window(now_us()))
        embedder_id = m.embedder_id("ns")
        with store.db.snapshot() as conn:
            # at this size the planner would rather sort everything (exactly); make it
            # read the HNSW index, as it does for large scopes
            conn.execute("SET LOCAL enable_sort = off")
            conn.execute("SET LOCAL enable_seqscan = off")
            rows = vectors.approximate(conn, "ns", prefixed("r"), where, params, embedder_id,
                                       vector, 10, ef_search=40)  # fmt: skip
            scope, scope_params = scope_rowids(
                store.dialect, "ns", request, request.window(now_us())
            )
            _, _, exact = vectors.exact(conn, "ns", scope, scope_params, embedder_id, vector, 10)
        assert rows is not None and len(rows) == 10
        assert [row[0] for row in rows] == sorted(exact, key=lambda rowid: -exact[rowid])


def test_schema_is_created_once_and_versioned(pg_target: str) -> None:
    erstwhile.open(pg_target, embedder="none").close()
    with erstwhile.open(pg_target, embedder="none") as m:  # a second open migrates nothing
        m.add("ns", "still here")
    with psycopg.connect(pg_target) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        assert rows.fetchall() == [(i, name) for i, (name, _) in enumerate(MIGRATIONS, start=1)]


def test_postgres_urls_select_the_postgres_backend(pg_target: str) -> None:
    assert resolve_target("postgresql://u@h/db") == "postgresql://u@h/db"
    assert resolve_target("postgres://u@h/db") == "postgres://u@h/db"
    with pytest.raises(erstwhile.InvalidInput) as error:
        resolve_target("mysql://u@h/db")
    assert "postgresql://" in error.value.message
    with erstwhile.open(pg_target, embedder="none") as m:
        assert m.service.store.backend == "postgres"


def test_scope_rows_gain_validity_when_an_older_schema_migrates(pg_target: str) -> None:
    """m003 fills the validity of existing tag and metadata rows from their records:
    written here under the current schema, taken back to the schema before m003, and
    opened again."""
    with erstwhile.open(pg_target, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [
            {"id": "open", "content": "quiet river", "tags": ["t"], "metadata": {"room": "a"}},
            {"id": "ended", "content": "quiet river", "tags": ["t"], "metadata": {"room": "a"},
             "valid_from": "2026-01-01", "valid_to": "2026-02-01"},
        ])  # fmt: skip
        m.delete("ns", "ended")
    with psycopg.connect(pg_target, autocommit=True) as conn:
        for table in ("record_tags", "record_meta"):
            conn.execute(
                f"ALTER TABLE {table} DROP COLUMN valid_from, DROP COLUMN valid_to,"
                " DROP COLUMN deleted_at"
            )
        conn.execute("DELETE FROM schema_migrations WHERE name = 'm003_scope_rows_carry_validity'")
    with erstwhile.open(pg_target, embedder="hash", background_jobs=False) as m:
        for ranking in ("lexical", "semantic"):
            assert m.search("ns", "river", tags=["t"], ranking=ranking).ids() == ["open"]
            historical = m.search("ns", "river", filter={"room": "a"}, ranking=ranking,
                                  include_historical=True)  # fmt: skip
            assert sorted(historical.ids()) == ["ended", "open"]
    with psycopg.connect(pg_target) as conn:
        for table in ("record_tags", "record_meta"):
            disagreeing = conn.execute(
                f"SELECT count(*) FROM {table} m JOIN records r"
                " ON r.namespace = m.namespace AND r.rowid = m.record"
                " WHERE m.valid_from IS DISTINCT FROM r.valid_from"
                " OR m.valid_to IS DISTINCT FROM r.valid_to"
                " OR m.deleted_at IS DISTINCT FROM r.deleted_at"
            ).fetchone()
            assert disagreeing == (0,), table


def test_scope_indexes_become_covering_when_an_older_schema_migrates(pg_target: str) -> None:
    """m008 widens the tag and metadata indexes in place: a store written under the
    schema before it (its two indexes as they were) keeps every answer, and a
    filtered scope can then be read from the index alone."""
    batch = [{"id": f"r{i:02d}", "content": f"quiet river {i}", "tags": [f"t{i % 3}"],
              "metadata": {"room": f"room-{i % 4}", "priority": str(i % 5)}}
             for i in range(40)]  # fmt: skip
    searches: list[dict[str, Any]] = [
        {"tags": ["t1"]}, {"filter": {"room": "room-2"}},
        {"predicates": [{"key": "room", "op": "IN", "values": ["room-1", "room-3"]}]},
        {"predicates": [{"key": "priority", "op": "GTE", "values": ["3"]}], "tags": ["t0"]},
    ]  # fmt: skip

    def answers(m: erstwhile.Memory) -> list[list[str]]:
        return [m.search("ns", "river", ranking=ranking, top_k=50, **search).ids()
                for search in searches for ranking in ("lexical", "semantic")]  # fmt: skip

    with erstwhile.open(pg_target, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", batch)
        m.invalidate("ns", "r05")
        m.delete("ns", "r06")
        expected = answers(m)
    with psycopg.connect(pg_target, autocommit=True) as conn:  # the schema before m008
        conn.execute("DROP INDEX record_tags_tag")
        conn.execute("CREATE INDEX record_tags_tag ON record_tags (namespace, md5(tag), record)")
        conn.execute("DROP INDEX record_meta_value")
        conn.execute(
            "CREATE INDEX record_meta_value ON record_meta (namespace, key, md5(value), record)"
        )
        conn.execute("DELETE FROM schema_migrations WHERE name = 'm008_covering_scope_indexes'")
    with erstwhile.open(pg_target, embedder="hash", background_jobs=False) as m:
        assert answers(m) == expected
        m.upsert("ns", [{"id": "late", "content": "quiet river late", "tags": ["t1"],
                         "metadata": {"room": "room-2"}}])  # fmt: skip
        assert "late" in m.search("ns", "river", tags=["t1"], filter={"room": "room-2"}).ids()
    with psycopg.connect(pg_target, autocommit=True) as conn:
        included = dict(conn.execute(
            "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum)"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_attribute a ON a.attrelid = i.indexrelid AND a.attnum > i.indnkeyatts"
            " WHERE c.relname IN ('record_tags_tag', 'record_meta_value')"
            " AND c.relnamespace = current_schema()::regnamespace GROUP BY c.relname"
        ).fetchall())  # fmt: skip
        assert included == {
            "record_tags_tag": ["tag", "valid_from", "valid_to", "deleted_at"],
            "record_meta_value": ["value", "valid_from", "valid_to", "deleted_at"],
        }
        # read by the index: only one that covers the scope's columns can be read
        # alone (whether the heap is then skipped depends on VACUUM's visibility map,
        # which other sessions of the server can hold back)
        conn.execute("VACUUM record_meta")
        for scan in ("seqscan", "bitmapscan"):
            conn.execute(f"SET enable_{scan} = off".encode())
        plan = "\n".join(row[0] for row in conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF) SELECT record FROM record_meta WHERE namespace = 'ns'"
            " AND key = 'room' AND md5(value) = md5('room-2') AND value = 'room-2'"
            " AND valid_from < 9e18 AND (valid_to IS NULL OR valid_to > 0) AND deleted_at IS NULL"
        ).fetchall())  # fmt: skip
        assert "Index Only Scan using record_meta_value" in plan, plan
        assert "Disabled" not in plan, plan


def test_a_store_in_public_does_not_pass_for_a_schema_of_its_own(
    postgres_server: PgServer,
) -> None:
    """A schema's URL searches ``schema, public`` (pgvector lives in public); a store
    already in public must not be taken for the schema's own store."""
    database = f"d_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"'.encode())
    try:
        url = urlunsplit(urlsplit(postgres_server.url)._replace(path=f"/{database}"))
        with erstwhile.open(url, embedder="hash", background_jobs=False) as public:
            public.add("ns", "kept in public", key="k")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute('CREATE SCHEMA "own"')
        with erstwhile.open(with_schema(url, "own"), embedder="hash", background_jobs=False) as m:
            assert m.search("ns", "kept", include_historical=True).hits == []
            m.add("ns", "kept in its own schema", key="k")  # the key is free here
        with erstwhile.open(url, embedder="hash", background_jobs=False) as public:
            assert public.search("ns", "kept").ids() == [
                public.search("ns", "public").hits[0].record.id
            ]
    finally:
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'.encode())


def test_a_migrated_schema_has_nothing_pending(pg_target: str) -> None:
    """Once migrated, opening again finds nothing to do without taking the lock."""
    erstwhile.open(pg_target, embedder="none").close()
    with psycopg.connect(pg_target) as conn:
        assert not pending(Connection(conn))


def test_pool_size_and_statement_timeout_are_the_store_options(pg_target: str) -> None:
    options = StorageOptions(pool_size=2, pool_timeout=0.5, statement_timeout=0.2)
    with erstwhile.open(pg_target, embedder="none", storage=options) as m:
        store = m.service.store
        assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
        db = store.dialect.db
        assert db.pool.max_size == 2
        with db.read() as conn:
            conn.execute("SELECT pg_sleep(0.05)")  # within the limit
        with pytest.raises(erstwhile.StorageUnavailable) as cancelled, db.read() as conn:
            conn.execute("SELECT pg_sleep(5)")
        assert "storage.statement_timeout" in cancelled.value.message
        # both connections taken: a third waits, then gives up
        with db.read(), db.read(), pytest.raises(erstwhile.StorageUnavailable), db.read():
            pass
        m.add("ns", "the store still works")  # nothing was left broken
        assert m.search("ns", "works").ids()


def test_a_large_batch_goes_by_copy_and_a_refused_row_changes_nothing(
    pg_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of many records leaves pipeline mode and sends its rows by COPY; when
    the server refuses one of them (here a trigger, during the postings' COPY, after
    the records' went through) the whole batch is rolled back."""
    copied: list[str] = []
    copy = psycopg.Cursor.copy

    def recording_copy(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kw: Any) -> Any:
        copied.append(statement.decode() if isinstance(statement, bytes) else str(statement))
        return copy(self, statement, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "copy", recording_copy)
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"id": "seed", "content": "small batches stay pipelined"}])
        assert copied == []
        batch = [{"id": f"r{i:03d}", "content": f"copy word{i} shared", "tags": ["t"],
                  "metadata": {"room": str(i % 3)}} for i in range(200)]  # fmt: skip
        m.upsert("ns", batch)
        tables = {statement.split()[1] for statement in copied}
        assert {"records", "record_tags", "record_meta", "ledger",
                "vectors", "lexical_postings"} <= tables  # fmt: skip
        assert m.get("ns", "r123").metadata == {"room": "0"}
        assert m.search("ns", "word77", ranking="lexical").ids() == ["r077"]
        semantic = m.search("ns", "copy word5 shared", ranking="semantic", top_k=200)
        assert len(semantic.hits) == 200 and semantic.unembedded == 0
        store = m.service.store
        assert isinstance(store, SqlStore)
        assert all(not finding.problems for finding in store.integrity())
        with psycopg.connect(pg_target) as conn:
            conn.execute(
                "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN IF NEW.term = 'poison' THEN RAISE EXCEPTION 'refused'; END IF;"
                " RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse_poison BEFORE INSERT ON lexical_postings"
                " FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
            )
        before = dump_tables(pg_target)
        copied.clear()
        poisoned = [{"id": f"p{i:03d}", "content": f"fresh text {i}", "tags": ["t"]}
                    for i in range(199)] + [{"id": "r001", "content": "poison"}]  # fmt: skip
        with pytest.raises(psycopg.errors.RaiseException):
            m.upsert("ns", poisoned)
        assert copied and copied[0].startswith("COPY records")  # the records had gone
        assert dump_tables(pg_target) == before
        assert m.search("ns", "fresh", ranking="lexical").hits == []


@pytest.mark.parametrize(("scope_rows", "exact_limit"), [(5, 0), (5, 3), (5, 1000), (1000, 0),
                                                         (1000, 1000)])  # fmt: skip
def test_every_branch_of_the_vector_lane_gives_the_exact_answer(
    pg_target: str, monkeypatch: pytest.MonkeyPatch, scope_rows: int, exact_limit: int
) -> None:
    """A scope read whole or counted, ranked exactly or by the index (with the rowids
    as its filter, or the scope's own clauses): the same top 10 as a brute force."""
    monkeypatch.setattr(dialect_module, "SCOPE_ROWS", scope_rows)
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=32),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"id": f"r{i:02d}", "content": f"garden {i % 7} tools {i % 5}",
                         "metadata": {"room": "ab"[i % 2]}} for i in range(60)])  # fmt: skip
        m.invalidate("ns", "r01")
        store = m.service.store
        assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
        store.build_vector_index(32)
        store.dialect.exact_limit = exact_limit
        embedder_id = m.embedder_id("ns")
        vector = m.service.embedder_for("ns").embed_query("garden 3 tools")  # type: ignore[union-attr]
        stored = store.vectors_for("ns", [f"r{i:02d}" for i in range(60)], embedder_id)
        for scope, room in (({"filter": {"room": "b"}}, "b"), ({}, None)):
            ids = [i for i in range(60) if i != 1 and (room is None or "ab"[i % 2] == room)]
            scores = {f"r{i:02d}": float(np.dot(stored[f"r{i:02d}"], vector)) for i in ids}
            truth = sorted(scores, key=lambda rid: (-scores[rid], rid))[:10]
            found = m.search("ns", query_vector=vector.tolist(), top_k=10, **scope)
            assert found.ids() == truth, (scope, found.ids(), truth)
            assert [h.score for h in found.hits] == pytest.approx([scores[r] for r in truth])
            assert found.unembedded == 0


_lanes = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    palette=st.integers(1, 6),
    picks=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=30),
    hidden=st.sets(st.integers(0, 29), max_size=4),
    limits=st.sampled_from([(2, 0), (5, 0), (5, 3), (5, 1000), (1000, 0), (1000, 8),
                            (1000, 1000)]),
    top_k=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    warm=st.booleans(),
)  # fmt: skip
def test_every_branch_of_the_vector_lane_agrees_with_a_brute_force(
    indexed_store: erstwhile.Memory, palette: int, picks: list[tuple[int, bool]],
    hidden: set[int], limits: tuple[int, int], top_k: int, seed: int, warm: bool,
) -> None:  # fmt: skip
    """Random scopes (some records repeating another's vector: ties), every pair of
    switch points: the lane's top_k is the brute force's, ties by id, scores exact.
    ``warm``: answered by the process's copy (scope_copy.py) from the first search."""
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((palette, 16))
    namespace = f"v{next(_lanes)}"
    records = [{"id": f"r{i:02d}", "content": f"c{i}", "metadata": {"room": "ab"[b]},
                "vector": directions[p % palette].tolist()}
               for i, (p, b) in enumerate(picks)]  # fmt: skip
    m = indexed_store
    m.upsert(namespace, records)
    for i in hidden:
        if i < len(records):
            m.invalidate(namespace, f"r{i:02d}")
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    stored = store.vectors_for(namespace, [r["id"] for r in records], m.embedder_id(namespace))
    query = rng.standard_normal(16)
    query = (query / np.linalg.norm(query)).astype(np.float32)
    scope_rows, exact_limit = limits
    saved = dialect_module.SCOPE_ROWS, store.dialect.exact_limit
    dialect_module.SCOPE_ROWS, store.dialect.exact_limit = limits
    store.dialect.copies.warm_after = 1 if warm else 10**9
    try:
        for scope, room in (({"filter": {"room": "b"}}, "b"), ({}, None)):
            ids = [r["id"] for i, r in enumerate(records) if i not in hidden
                   and (room is None or r["metadata"]["room"] == room)]  # fmt: skip
            scores = {rid: float(np.dot(np.asarray(stored[rid], np.float64), query))
                      for rid in ids}  # fmt: skip
            truth = sorted(scores, key=lambda rid: (-round(scores[rid], 6), rid))[:top_k]
            found = m.search(namespace, query_vector=query.tolist(), top_k=top_k, **scope)
            assert len(found.hits) == len(truth), (scope_rows, exact_limit, scope)
            assert [h.score for h in found.hits] == pytest.approx(
                [scores[r] for r in truth], abs=1e-5
            )
            # ties by id: equal scores come in id order; otherwise the oracle's order
            assert found.ids() == truth or all(
                abs(scores[a] - scores[b]) < 1e-5 for a, b in zip(found.ids(), truth, strict=True)
            ), (found.ids(), truth)
            assert found.unembedded == 0
    finally:
        dialect_module.SCOPE_ROWS, store.dialect.exact_limit = saved


@pytest.fixture
def indexed_store(pg_target: str) -> Iterator[erstwhile.Memory]:
    """A PostgreSQL store whose 16-dimension HNSW index exists from the start."""
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False) as m:  # fmt: skip
        store = m.service.store
        assert isinstance(store, SqlStore)
        store.build_vector_index(16)
        yield m


def test_a_scope_ranked_exactly_costs_one_round_trip(pg_target: str, tmp_path: Any) -> None:
    """The common search (a scope within exact_limit) is one statement, which is its
    own snapshot: no BEGIN, no SET TRANSACTION, no COMMIT (libpq's trace of the wire)."""
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"content": f"note {i}", "metadata": {"room": "ab"[i % 2]}}
                        for i in range(30)])  # fmt: skip
        store = m.service.store
        assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
        vector = [1.0] + [0.0] * 15
        m.search("ns", query_vector=vector, filter={"room": "a"})
        pool = store.dialect.db.pool
        trace = tmp_path / "trace"
        with trace.open("w") as out:
            connections = list(pool._pool)
            for conn in connections:
                conn.pgconn.trace(out.fileno())
                conn.pgconn.set_trace_flags(1)  # no timestamps
            found = m.search("ns", query_vector=vector, filter={"room": "a"})
            for conn in connections:
                conn.pgconn.untrace()
        sent = [line.split("\t")[2] for line in trace.read_text().splitlines()
                if line.startswith("F\t")]  # fmt: skip
        assert len(found.hits) == 10
        assert sent.count("Sync") == 1 and "Query" not in sent, sent  # no BEGIN/COMMIT
        assert sent.count("Execute") == 1, sent


@pytest.mark.parametrize(
    "bad",
    [{"content": "a\x00b"}, {"content": "ok", "metadata": {"k": "v\x00"}},
     {"content": "ok", "tags": ["t\x00"]}, {"content": "ok", "source": "s\x00"}],
)  # fmt: skip
def test_a_nul_character_is_refused_with_a_clear_error_and_writes_nothing(
    pg_target: str, bad: dict[str, Any]
) -> None:
    """PostgreSQL's text cannot hold U+0000: the write is refused as invalid input (not
    a driver error), says what to remove, and leaves nothing of its batch behind."""
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("ns", [{"id": "kept", "content": "apple"}])
        with pytest.raises(erstwhile.InvalidInput, match="NUL character"):
            m.upsert("ns", [{"id": "fine", "content": "a good one"}, {"id": "bad", **bad}])
        assert [h.record.id for h in m.search("ns", "apple good", ranking="lexical").hits] == [
            "kept"
        ]
        for gone in ("fine", "bad"):
            with pytest.raises(erstwhile.NotFound):
                m.get("ns", gone)
        assert [c.id for c in m.changes("ns", "2000-01-01T00:00:00Z").changes] == ["kept"]

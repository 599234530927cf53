"""Ready to distribute by namespace (Citus): read from the real catalog and from the
statements the store really sends, not from a list kept by hand.

A distributed table can enforce a primary key or unique constraint only when it
includes the distribution column, and a statement is routed to one shard only when
it names that column's value. So: every key of every namespace table includes
``namespace``, every foreign key carries it, and every statement a workload sends
to those tables names its namespace (docs/postgres.md, "On Citus").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from tests.support.pg import PgServer

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.postgres import citus

#: Tables that hold no namespace's data: what the store makes of them on Citus.
NOT_DISTRIBUTED = {
    **dict.fromkeys(citus.REFERENCE, "reference"), **dict.fromkeys(citus.LOCAL, "local"),
}  # fmt: skip

#: Statements that may reach every shard, on purpose (docs/postgres.md says which).
ALL_SHARDS = (
    re.compile(r"^SELECT seq, at, op, namespace, record_id, version, actor, detail FROM ledger"
               r" ORDER BY seq$"),  # ledger() without a namespace: an inspection
    re.compile(r"^ANALYZE "),  # planner statistics after the first writes
)  # fmt: skip


@pytest.fixture
def pg_target(postgres_server: PgServer) -> Iterator[str]:
    target = postgres_server.new_target()
    yield target
    postgres_server.drop_target(target)


def catalog(target: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(target) as conn:
        return conn.execute(sql).fetchall()


def test_every_key_of_a_namespace_table_includes_the_namespace(pg_target: str) -> None:
    erstwhile.open(pg_target, embedder="none").close()  # the schema, every migration run
    tables = {
        row[0]: set(row[1])
        for row in catalog(pg_target, """
            SELECT c.relname, array_agg(a.attname::text) FROM pg_class c
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
            GROUP BY c.relname""")
    }  # fmt: skip
    assert {"records", "vectors", "ledger", "record_meta"} <= set(tables)
    for table in set(tables) - set(NOT_DISTRIBUTED):
        assert "namespace" in tables[table], f"{table} has no namespace column"
    # every unique index (primary keys and unique constraints among them), its key
    # columns only (INCLUDE columns do not count)
    unique = catalog(pg_target, """
        SELECT c.relname, i.indexrelid::regclass::text, ARRAY(
            SELECT coalesce(a.attname::text, '(expression)')
            FROM unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) k(attnum)
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        WHERE c.relnamespace = current_schema()::regnamespace AND i.indisunique""")  # fmt: skip
    assert unique, "the catalog query found no unique index at all"
    lacking = [(t, index, cols) for t, index, cols in unique
               if t not in NOT_DISTRIBUTED and "namespace" not in cols]  # fmt: skip
    assert lacking == [], f"keys a distributed table could not enforce: {lacking}"
    foreign = catalog(pg_target, """
        SELECT c.conrelid::regclass::text, c.conname, ARRAY(
            SELECT a.attname::text FROM unnest(c.conkey) k(attnum)
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum),
            c.confrelid::regclass::text
        FROM pg_constraint c
        WHERE c.connamespace = current_schema()::regnamespace AND c.contype = 'f'""")  # fmt: skip
    assert foreign, "the catalog query found no foreign key at all"
    for table, name, columns, target in foreign:
        assert "namespace" in columns, f"{table}.{name} -> {target} does not carry the namespace"
        assert target not in NOT_DISTRIBUTED, f"{table}.{name} points at {target}"


DISTRIBUTED_NAMES = (
    "records", "record_tags", "record_meta", "vectors", "ledger",
    "entities", "mentions", "relations", "possibly_same_as", "extraction_markers",
)  # fmt: skip
_TOUCHES = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|COPY)\s+(" + "|".join(DISTRIBUTED_NAMES) + r")\b", re.I
)
#: The namespace pinned to a value: ``namespace = <parameter>``, or an INSERT's column.
_PINNED = re.compile(
    r"namespace\s*=\s*(?:\?|%s|%\(namespace\)s)|^(?:INSERT INTO|COPY) \w+ \([^)]*\bnamespace\b",
    re.I,
)


def test_every_statement_names_its_namespace(
    pg_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload through the public API — writes of every kind, every lane, the
    graph, the embed job — while every statement the store sends is recorded."""
    sent: list[str] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    copy = psycopg.Cursor.copy

    def text(sql: Any) -> str:
        return sql.decode() if isinstance(sql, bytes) else str(sql)

    def recording_execute(self: psycopg.Cursor[Any], sql: Any, *args: Any, **kw: Any) -> Any:
        sent.append(text(sql))
        return execute(self, sql, *args, **kw)

    def recording_executemany(self: psycopg.Cursor[Any], sql: Any, *args: Any, **kw: Any) -> Any:
        sent.append(text(sql))
        return executemany(self, sql, *args, **kw)

    def recording_copy(self: psycopg.Cursor[Any], sql: Any, *args: Any, **kw: Any) -> Any:
        sent.append(text(sql))
        return copy(self, sql, *args, **kw)

    # at the driver: every statement, however the store composed it (a batch's rows by COPY)
    monkeypatch.setattr(psycopg.Cursor, "execute", recording_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", recording_executemany)
    monkeypatch.setattr(psycopg.Cursor, "copy", recording_copy)
    workload(pg_target, sent.clear)  # the migrations ran on their own connection
    touching = [sql for sql in sent if _TOUCHES.search(sql)]
    assert len(touching) > 50, "the workload reached too few statements to mean anything"
    assert any(sql.startswith("COPY records") for sql in touching)
    unscoped = [
        sql for sql in touching
        if not _PINNED.search(sql) and not any(p.match(sql) for p in ALL_SHARDS)
    ]  # fmt: skip
    assert unscoped == [], "statements that would reach every shard:\n" + "\n".join(unscoped)


def workload(target: str, started: Callable[[], object] = lambda: None) -> None:
    """Writes of every kind, every lane with filters, history, the graph, the embed
    job and expiry, through the public API (``started`` once the store is open)."""
    with erstwhile.open(target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False, extractor="heuristic") as m:  # fmt: skip
        started()
        m.upsert("ns", [{"id": f"r{i}", "content": f"Alice met Bob in Paris {i}",
                         "tags": ["t"], "metadata": {"room": str(i % 3)}, "key": f"k{i}"}
                        for i in range(30)])  # fmt: skip
        bulk = [{"id": f"bulk{i}", "content": f"a bulk load {i}", "tags": ["t"],
                 "metadata": {"room": str(i % 3)}} for i in range(100)]  # fmt: skip
        m.upsert("ns", bulk)  # by COPY
        m.supersede("ns", "r1", {"id": "r1b", "content": "Alice met Carol in Rome"})
        m.invalidate("ns", "r2")
        m.verify("ns", "r3", "reviewer")
        m.delete("ns", "r4")
        m.delete("ns", "r5", hard=True)
        m.set_embedding("ns", "r6", list(np.ones(16)))
        m.upsert("ns", [{"id": "late", "content": "written without a vector"}])
        m.reindex("ns")  # the embed job: a backlog stored by store_vectors
        m.extract("ns")
        now = m.get("ns", "r1b").updated_at
        for ranking in ("lexical", "semantic", "hybrid"):
            m.search("ns", "Alice Paris", ranking=ranking, filter={"room": "1"}, tags=["t"])
            for time in ({"as_of": now}, {"known_at": now},
                         {"between": {"from": "2020-01-01T00:00:00Z", "until": now}}):  # fmt: skip
                m.search("ns", "Alice Paris", ranking=ranking, **time)
        m.search("ns", "Alice", include_historical=True, expand=True)
        m.search("ns", query_vector=list(np.ones(16)), predicates=[
            {"key": "room", "op": "GTE", "values": ["1"]}])  # fmt: skip
        m.get("ns", "r1", version=1)
        m.history("ns", "r1b")
        m.entities("ns")
        m.expire("ns", filter={"room": "2"}, action="soft_delete", max_rows=100)
        m.expire("ns", filter={"room": "0"}, action="hard_delete", max_rows=100)


@pytest.fixture
def citus_target(citus_server: PgServer) -> Iterator[str]:
    target = citus_server.new_target()
    yield target
    citus_server.drop_target(target)


def test_on_citus_every_table_is_placed_by_the_store(citus_target: str) -> None:
    """Opened on the coordinator, the store distributes every namespace table by
    namespace, co-located with ``records``; the global tables are reference tables,
    the bookkeeping stays on the coordinator, and no table keeps a trigger."""
    erstwhile.open(citus_target, embedder="none").close()
    erstwhile.open(citus_target, embedder="none").close()  # a second open: nothing to do
    tables = {row[0] for row in catalog(citus_target, """
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
        AND NOT c.relispartition""")}  # fmt: skip
    with psycopg.connect(citus_target) as conn:
        placed = citus.placement(conn)  # type: ignore[arg-type]
    assert set(placed) == tables - set(citus.LOCAL)
    colocation = placed["records"][1]
    for table in tables - set(citus.LOCAL):
        if table in citus.REFERENCE:
            assert placed[table][0] == "reference", table
        else:
            assert placed[table] == ("distributed", colocation), table
    keys = dict(catalog(citus_target, """
        SELECT c.relname, column_to_column_name(d.logicalrelid, d.partkey)
        FROM pg_dist_partition d JOIN pg_class c ON c.oid = d.logicalrelid
        WHERE c.relnamespace = current_schema()::regnamespace
            AND d.partmethod = 'h'"""))  # fmt: skip
    assert set(keys.values()) == {"namespace"}
    triggers = catalog(citus_target, """
        SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = current_schema()::regnamespace
            AND NOT t.tgisinternal""")  # fmt: skip
    assert triggers == []


def test_on_citus_a_statement_on_many_shards_is_an_error(citus_target: str) -> None:
    """The guard the Citus lane runs under (tests/support/pg.py): a statement planned
    as more than one task fails, so a store statement that fans out fails its test."""
    erstwhile.open(citus_target, embedder="none").close()
    with psycopg.connect(citus_target) as conn:
        assert conn.execute("SELECT count(*) FROM records WHERE namespace = 'a'").fetchone()
        with pytest.raises(psycopg.Error, match="multi-task"):
            conn.execute("SELECT count(*) FROM records")


def test_on_citus_the_workload_runs_one_shard_a_statement(citus_target: str) -> None:
    """The workload above on a distributed store: each statement one task (one shard),
    or the guard fails it."""
    workload(citus_target)


def test_on_citus_a_second_handle_never_answers_stale(citus_target: str) -> None:
    """A handle that searched a namespace many times (on plain PostgreSQL its scope
    copy would be warm) answers every other handle's invalidations, supersessions,
    soft and hard deletes at once."""
    embedder = HashEmbedder(dimensions=16)
    writer = erstwhile.open(citus_target, embedder=embedder, background_jobs=False)
    reader = erstwhile.open(citus_target, embedder=embedder, background_jobs=False)
    with writer, reader:
        writer.upsert("ns", [{"id": f"r{i}", "content": f"river stone {i}"} for i in range(8)])

        def found(ranking: str) -> set[str]:
            hits = reader.search("ns", "river stone", ranking=ranking, top_k=20).hits
            return {hit.record.id for hit in hits}

        for _ in range(5):
            for ranking in ("semantic", "lexical", "hybrid"):
                assert found(ranking) == {f"r{i}" for i in range(8)}
        writer.invalidate("ns", "r0")
        writer.delete("ns", "r1")
        writer.delete("ns", "r2", hard=True)
        writer.supersede("ns", "r3", {"id": "r3b", "content": "river stone again"})
        expected = {"r3b", *(f"r{i}" for i in range(4, 8))}
        for ranking in ("semantic", "lexical", "hybrid"):
            assert found(ranking) == expected, ranking

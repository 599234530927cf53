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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from tests.support.pg import PgServer

import erstwhile
from erstwhile.embedding import HashEmbedder

#: Tables that hold no namespace's data, and what they become on Citus.
NOT_DISTRIBUTED = {
    "namespaces": "reference table (its key, name, is the namespace itself)",
    "tokens": "reference table (a token may span namespaces)",
    "jobs": "coordinator-local bookkeeping (job ids are global)",
    "schema_migrations": "coordinator-local bookkeeping",
}

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
    with erstwhile.open(pg_target, embedder=HashEmbedder(dimensions=16),
                        background_jobs=False, extractor="heuristic") as m:  # fmt: skip
        sent.clear()  # the migrations ran on their own connection; from here on: the store
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
        for ranking in ("lexical", "semantic", "hybrid"):
            m.search("ns", "Alice Paris", ranking=ranking, filter={"room": "1"}, tags=["t"])
        m.search("ns", "Alice", include_historical=True, expand=True)
        m.search("ns", query_vector=list(np.ones(16)), predicates=[
            {"key": "room", "op": "GTE", "values": ["1"]}])  # fmt: skip
        m.get("ns", "r1", version=1)
        m.history("ns", "r1b")
        m.entities("ns")
        m.expire("ns", filter={"room": "2"}, action="soft_delete", max_rows=100)
        m.expire("ns", filter={"room": "0"}, action="hard_delete", max_rows=100)
    touching = [sql for sql in sent if _TOUCHES.search(sql)]
    assert len(touching) > 50, "the workload reached too few statements to mean anything"
    assert any(sql.startswith("COPY records") for sql in touching)
    unscoped = [
        sql for sql in touching
        if not _PINNED.search(sql) and not any(p.match(sql) for p in ALL_SHARDS)
    ]  # fmt: skip
    assert unscoped == [], "statements that would reach every shard:\n" + "\n".join(unscoped)


def test_the_distribution_ddl_in_the_docs_covers_every_table(pg_target: str) -> None:
    """docs/postgres.md's Citus statements name every table of the schema once, each
    as the catalog says it should be placed: a table left out would stay local to the
    coordinator, and every search of it would leave the shard."""
    erstwhile.open(pg_target, embedder="none").close()
    tables = {row[0] for row in catalog(pg_target, """
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
        AND NOT c.relispartition""")}  # fmt: skip
    docs = (Path(__file__).resolve().parents[2] / "docs" / "postgres.md").read_text()
    placed = re.findall(
        r"SELECT (create_distributed_table|create_reference_table"
        r"|citus_add_local_table_to_metadata)\('(\w+)'",
        docs,
    )
    named = [table for _, table in placed]
    assert sorted(set(named)) == sorted(named), "a table is placed twice"
    assert set(named) == tables, (sorted(tables - set(named)), sorted(set(named) - tables))
    kinds = dict((table, kind) for kind, table in placed)
    for table in tables:
        local = table in NOT_DISTRIBUTED
        assert (kinds[table] != "create_distributed_table") == local, table

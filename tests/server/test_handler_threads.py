"""``server.threads``: how many request handlers one worker runs at once. On SQLite one
at a time by default (a handler computes under the interpreter lock, so handlers side
by side only slow each other); on PostgreSQL, or when set, several at once.

Observed from outside: a real ``erstwhile serve`` embeds each semantic query through
a fake embedding server (real HTTP, the OpenAI protocol), which holds each call until
a second one arrives (or a few seconds pass) and records how many were ever in flight
together. A handler embeds inside its own thread, so that count is how many handlers
ran at once."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.embedding.fake_server import FakeServer, Received, openai_reply, serve
from tests.support import pg

from .harness import Server, start_server, write_config

CLIENTS = 4
HOLD_SECONDS = 3.0  # how long a lone call waits for company (only the 1-thread case waits)


class Overlap:
    """A responder that counts the embedding calls in flight together."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.in_flight = 0
        self.most = 0

    def __call__(self, request: Received, number: int) -> tuple[int, dict[str, str], object]:
        with self.changed:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.in_flight >= 2, HOLD_SECONDS)
            self.in_flight -= 1
        return 200, {}, openai_reply(request)


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    fake, stop = serve()
    yield fake
    stop()


def serving(tmp: Path, target: str, provider: FakeServer, threads: int | None) -> Server:
    embedding = (
        f'[embedding]\nprovider = "openai"\nmodel = "m"\ndimensions = 8\n'
        f'base_url = "{provider.url}/v1"\ncache_size = -1\n'
    )
    config = write_config(tmp / "m.toml")
    config.write_text(config.read_text().replace('[embedding]\nprovider = "hash"\n', embedding))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERSTWHILE_")}
    if threads is not None:
        env["ERSTWHILE_SERVER__THREADS"] = str(threads)
    return start_server(target, config, "--no-auth", env=env)


def most_at_once(server: Server, provider: FakeServer) -> int:
    overlap = Overlap()
    provider.respond = overlap

    def search(i: int) -> int:
        with server.http() as client:
            body = {"query": f"query number {i}", "ranking": "semantic"}
            return client.post("/v1/namespaces/agent/search", json=body).status_code

    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        statuses = list(pool.map(search, range(CLIENTS)))
    assert statuses == [200] * CLIENTS
    assert time.monotonic() - started < 60
    return overlap.most


def test_sqlite_runs_one_handler_at_a_time(tmp_path: Path, provider: FakeServer) -> None:
    server = serving(tmp_path, str(tmp_path / "m.db"), provider, threads=None)
    try:
        assert most_at_once(server, provider) == 1
    finally:
        server.stop()


def test_threads_lets_handlers_run_side_by_side(
    tmp_path: Path, store_target: str, provider: FakeServer
) -> None:
    server = serving(tmp_path, store_target, provider, threads=3)
    try:
        assert most_at_once(server, provider) >= 2
    finally:
        server.stop()


def test_postgres_runs_handlers_side_by_side_by_default(
    tmp_path: Path, postgres_server: pg.PgServer, provider: FakeServer
) -> None:
    target = postgres_server.new_target()
    server = serving(tmp_path, target, provider, threads=None)
    try:
        assert most_at_once(server, provider) >= 2
    finally:
        server.stop()
        postgres_server.drop_target(target)

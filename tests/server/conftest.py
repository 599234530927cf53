"""One real ``erstwhile serve`` per session for the REST tests (auth on, small caps)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from .harness import Server, Tokens, make_tokens, start_server, write_config


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rest")
    running = start_server(root / "server.db", write_config(root / "erstwhile.toml"))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def tokens(server: Server) -> Tokens:
    return make_tokens(server)


@pytest.fixture
def ns() -> str:
    """A fresh namespace per test, so tests share one server without sharing data."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def admin(server: Server, tokens: Tokens) -> Iterator[httpx.Client]:
    with server.http(tokens.admin) as client:
        yield client


@pytest.fixture
def writer(server: Server, tokens: Tokens) -> Iterator[httpx.Client]:
    with server.http(tokens.writer) as client:
        yield client


@pytest.fixture
def reader(server: Server, tokens: Tokens) -> Iterator[httpx.Client]:
    with server.http(tokens.reader) as client:
        yield client


@pytest.fixture
def anonymous(server: Server) -> Iterator[httpx.Client]:
    with server.http() as client:
        yield client

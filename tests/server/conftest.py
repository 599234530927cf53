"""One real ``memstrata serve`` per session for the REST tests (auth on, small caps)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from .harness import Server, start_server, write_config


@dataclass(frozen=True)
class Tokens:
    admin: str
    writer: str
    reader: str
    scoped: str  # read + write, only in namespace "scoped"
    writer_id: str


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rest")
    running = start_server(root / "server.db", write_config(root / "memstrata.toml"))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def tokens(server: Server) -> Tokens:
    writer_id, writer = server.token(name="writer")
    return Tokens(
        admin=server.token(admin=True, name="admin")[1],
        writer=writer,
        reader=server.token(read_only=True, name="reader")[1],
        scoped=server.token(namespaces=["scoped"], name="scoped")[1],
        writer_id=writer_id,
    )


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

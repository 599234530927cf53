"""One real ``erstwhile serve`` per session for the gRPC tests, and a real grpcio client.

The server runs with auth on and the test caps (tests/server/harness.py), plus two
namespaces the error tests need: ``lexonly`` has no embedder, and ``broken`` embeds
with a command that always fails (so its records are stored without vectors).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from tests.server.harness import Server, Tokens, make_tokens, start_server, write_config

from erstwhile.adapters.grpc import semantic_pb2_grpc

NAMESPACES = """
[namespaces.lexonly.embedding]
provider = "none"

[namespaces.broken.embedding]
provider = "command"
command = ["false"]
model = "always-fails"
dimensions = 4
max_attempts = 1
"""
ERROR_CODE_KEY = "x-erstwhile-error-code"


class Rpc:
    """The Semantic stub with a token: ``rpc.Search(request)`` sends the metadata."""

    def __init__(self, channel: grpc.Channel, secret: str | None) -> None:
        self.stub = semantic_pb2_grpc.SemanticStub(channel)
        self.metadata = (("x-erstwhile-capability", f"Bearer {secret}"),) if secret else ()

    def __getattr__(self, method: str) -> Any:
        call = getattr(self.stub, method)
        return lambda request: call(request, metadata=self.metadata, timeout=60)


def error_code(error: grpc.RpcError) -> str | None:
    """The erstwhile code in a failed call's trailing metadata."""
    return dict(error.trailing_metadata() or ()).get(ERROR_CODE_KEY)  # type: ignore[attr-defined]


def write_grpc_config(path: Path) -> Path:
    return write_config(path, extra=NAMESPACES)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("grpc")
    running = start_server(root / "server.db", write_grpc_config(root / "erstwhile.toml"))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def tokens(server: Server) -> Tokens:
    return make_tokens(server)


@pytest.fixture(scope="session")
def channel(server: Server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_target) as opened:
        grpc.channel_ready_future(opened).result(timeout=30)
        yield opened


@pytest.fixture
def admin(channel: grpc.Channel, tokens: Tokens) -> Rpc:
    return Rpc(channel, tokens.admin)


@pytest.fixture
def writer(channel: grpc.Channel, tokens: Tokens) -> Rpc:
    return Rpc(channel, tokens.writer)


@pytest.fixture
def reader(channel: grpc.Channel, tokens: Tokens) -> Rpc:
    return Rpc(channel, tokens.reader)


@pytest.fixture
def ns() -> str:
    """A fresh namespace per test, so tests share one server without sharing data."""
    return "g-" + uuid.uuid4().hex[:12]


@pytest.fixture
def scoped(channel: grpc.Channel, tokens: Tokens) -> Rpc:
    """Read and write, in namespace ``scoped`` only."""
    return Rpc(channel, tokens.scoped)

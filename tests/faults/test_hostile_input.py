"""Hostile input on every interface (issue #43, items 8-10): a write of 100,000 tags,
a search of 1,000 tags and a 20,000-character namespace, against a real ``erstwhile
serve`` taking bodies up to the default 32 MiB, over REST, gRPC and MCP, and through
the Python API and the CLI. Each is refused with ``erstwhile.input.invalid`` (never a
5xx or a storage outage), changes nothing, and keeps its status and code.

The figures report how long each refusal of the 100,000-tag write took, in
milliseconds, as the client saw it (one request each; not asserted)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from tests.faults.figures import FIGURES
from tests.faults.server import assert_answer
from tests.server.harness import TEST_POLICY, Server, run_cli, start_server, write_config

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc import semantic_pb2_grpc
from erstwhile.domain.errors import InvalidInput
from mcp import Client

TAGS = [f"tag-{i}" for i in range(100_000)]
SEARCH_TAGS = TAGS[:1_000]
LONG_NS = "n" * 20_000
NS = "hostile"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root: Path = tmp_path_factory.mktemp("hostile")
    policy = {**TEST_POLICY, "max_body_bytes": 32 * 1024 * 1024}
    server = start_server(root / "server.db", write_config(root / "e.toml", policy=policy))
    _, secret = server.token(name="writer")
    yield server, secret
    server.stop()


def _timed(name: str, call: Any) -> Any:
    """``call()``, its duration added to the figures (whether it answers or raises)."""
    started = time.perf_counter()
    try:
        return call()
    finally:
        elapsed = round((time.perf_counter() - started) * 1000)
        FIGURES.add(f"100k-tag write refused, ms ({name})", elapsed)


def _nothing_written(server: Server) -> None:
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as m:
        assert NS not in m.service.namespaces()


def test_rest(big: tuple[Server, str]) -> None:
    server, secret = big
    with server.http(secret) as http:
        body = {"records": [{"content": "x", "tags": TAGS}]}
        answer = _timed("REST", lambda: http.post(f"/v1/namespaces/{NS}/records", json=body))
        assert_answer(answer)
        FIGURES.add("hostile inputs refused")
        assert answer.status_code == 400 and "records[0].tags" in answer.text, answer.text
        for _ in range(3):
            found = http.post(
                f"/v1/namespaces/{NS}/search", json={"query": "x", "tags": SEARCH_TAGS}
            )
            assert_answer(found)
            assert found.json()["error"]["code"] == "erstwhile.input.invalid", found.text
        long = http.post(f"/v1/namespaces/{LONG_NS}/search", json={"query": "x"})
        assert_answer(long)
        assert long.status_code == 400 and len(long.text) < 500, long.text[:500]
    _nothing_written(server)


def test_grpc(big: tuple[Server, str]) -> None:
    server, secret = big
    metadata = (("x-erstwhile-capability", f"Bearer {secret}"),)
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = semantic_pb2_grpc.SemanticStub(channel)
        upsert = pb.UpsertRequest(namespace=NS, records=[pb.Record(content="x", tags=TAGS)])
        many = pb.SearchRequest(namespace=NS, query_text="x", tags=SEARCH_TAGS)
        long = pb.SearchRequest(namespace=LONG_NS, query_text="x")
        calls = [
            ("gRPC", lambda: stub.Upsert(upsert, metadata=metadata, timeout=60)),
            ("", lambda: stub.Search(many, metadata=metadata, timeout=60)),
            ("", lambda: stub.Search(long, metadata=metadata, timeout=60)),
        ]
        for name, call in calls:
            with pytest.raises(grpc.RpcError) as caught:
                _timed(name, call) if name else call()
            error: Any = caught.value
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
            trailers = dict(error.trailing_metadata() or ())
            assert trailers.get("x-erstwhile-error-code") == "erstwhile.input.invalid"
            FIGURES.add("wire requests")
            FIGURES.add("hostile inputs refused")
    _nothing_written(server)


def test_mcp(big: tuple[Server, str]) -> None:
    server, secret = big

    async def run() -> list[str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"},
                                  timeout=httpx2.Timeout(60, read=300))  # fmt: skip
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as mcp:
            texts = []
            for name, arguments in (
                ("add_memory", {"content": "x", "tags": TAGS, "namespace": NS}),
                ("search_memories", {"query": "x", "tags": SEARCH_TAGS, "namespace": NS}),
            ):
                started = time.perf_counter()
                result = await mcp.call_tool(name, arguments)
                if name == "add_memory":
                    elapsed = round((time.perf_counter() - started) * 1000)
                    FIGURES.add("100k-tag write refused, ms (MCP)", elapsed)
                assert result.is_error
                FIGURES.add("hostile inputs refused")
                texts.append(result.content[0].text)  # type: ignore[union-attr]
            return texts

    for text in anyio.run(run):
        assert text.startswith("erstwhile.input.invalid: "), text[:300]
        assert len(text) < 500
    _nothing_written(server)


def test_python_api_and_cli(tmp_path: Path) -> None:
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as memory:
        records = [{"content": "x", "tags": TAGS}]
        with pytest.raises(InvalidInput, match=r"records\[0\]\.tags"):
            _timed("Python API", lambda: memory.upsert(NS, records))
        for _ in range(3):
            with pytest.raises(InvalidInput, match="tags"):
                memory.search(NS, "x", tags=SEARCH_TAGS)
        assert NS not in memory.service.namespaces()
    tag_options = [option for tag in TAGS[:300] for option in ("--tag", tag)]
    refused = run_cli(tmp_path / "m.db", "add", "x", "--namespace", NS, *tag_options)
    assert refused.returncode == 2 and "erstwhile.input.invalid" in refused.stderr, refused.stderr

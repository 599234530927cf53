"""MCP over streamable HTTP at ``/mcp`` of a real ``erstwhile serve`` process, behind
the same tokens as the REST API, through the SDK's ``Client``."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

import erstwhile
from erstwhile.access import Access
from mcp import Client

READ = {"search_memories", "get_memory", "memory_history"}


@dataclass
class Served:
    url: str
    secrets: dict[str, str]
    db: Path

    def client(self, who: str) -> Client:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.secrets[who]}"},
            timeout=httpx2.Timeout(30, read=300),
        )
        return Client(streamable_http_client(self.url, http_client=http))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Polls ``/healthz`` until the server answers; fails at once if it exits."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:
            process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"erstwhile serve exited with {process.returncode}: {log.read_text()}")
    pytest.fail(f"erstwhile serve did not answer {url}: {log.read_text()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, kit: Any) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("http")
    db = folder / "http.db"
    script = kit.erstwhile_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERSTWHILE_")}

    with erstwhile.open(db, embedder="none", background_jobs=False) as memory:
        access = Access(memory.service.store)
        secrets = {
            "writer": access.create_token(name="writer")[1],
            "reader": access.create_token(name="reader", read_only=True)[1],
            "agent": access.create_token(name="agent", namespaces=["agent"])[1],
        }
    port = free_port()
    log = folder / "serve.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [script, "--db", str(db), "--embedder", "hash", "serve", "--port", str(port),
             "--grpc-port", "0", "--log-level", "warning"],
            stdout=sink, stderr=sink, env=env,
        )  # fmt: skip
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/healthz", process, log)
        yield Served(url=f"http://127.0.0.1:{port}/mcp", secrets=secrets, db=db)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.anyio
async def test_a_write_token_lives_a_memory_over_http(served: Served, kit: Any) -> None:
    async with served.client("writer") as session:
        assert len((await session.list_tools()).tools) == 6
        await kit.memory_flow(session, namespace="http")
        await kit.bad_arguments_then_serving(session)


@pytest.mark.anyio
async def test_a_read_only_token_sees_and_calls_only_the_read_tools(
    served: Served, kit: Any
) -> None:
    async with served.client("writer") as session:
        await kit.tool(session, "add_memory", {"content": "Tea, no sugar", "namespace": "ro"})
    async with served.client("reader") as session:
        assert {t.name for t in (await session.list_tools()).tools} == READ
        found = await kit.tool(session, "search_memories", {"query": "tea", "namespace": "ro"})
        assert kit.contents(found) == ["Tea, no sugar"]
        for name, arguments in [
            ("add_memory", {"content": "Coffee", "namespace": "ro"}),
            ("forget_memory", {"id": found["hits"][0]["record"]["id"], "namespace": "ro"}),
        ]:
            message = await kit.refused(session, name, arguments)
            assert message.startswith("erstwhile.auth.forbidden: ")
    async with served.client("writer") as session:
        after = await kit.tool(session, "search_memories", {"query": "tea", "namespace": "ro"})
        assert kit.contents(after) == ["Tea, no sugar"]


@pytest.mark.anyio
async def test_a_namespaced_token_defaults_to_its_namespace_and_stays_in_it(
    served: Served, kit: Any
) -> None:
    async with served.client("agent") as session:
        written = await kit.tool(session, "add_memory", {"content": "Agent notes"})
        assert written["namespace"] == "agent"
        message = await kit.refused(
            session, "search_memories", {"query": "notes", "namespace": "default"}
        )
        assert message.startswith("erstwhile.auth.forbidden: ") and "default" in message
    # the write is ledgered under the token's id, not as a local actor
    with erstwhile.open(served.db, embedder="none", background_jobs=False) as memory:
        entries = memory.service.store.ledger("agent")
    assert [(e.record_id, e.actor.startswith("tok_")) for e in entries] == [(written["id"], True)]


@pytest.mark.anyio
async def test_a_namespaced_token_is_refused_before_its_arguments_are_read(
    served: Served, kit: Any
) -> None:
    """Outside its namespaces a call is forbidden whatever else is wrong with it, as
    over REST and gRPC; inside them the same mistakes are bad input."""
    wrong: list[dict[str, Any]] = [
        {"query": "x", "top_k": "ten"},
        {"query": "x", "tags": ["t"] * 300},
        {"query": "x", "colour": "red"},
    ]
    async with served.client("agent") as session:
        for arguments in wrong:
            for namespace, code in (("default", "auth.forbidden"), (["agent"], "auth.forbidden"),
                                    ("agent", "input.invalid")):  # fmt: skip
                message = await kit.refused(
                    session, "search_memories", {**arguments, "namespace": namespace}
                )
                assert message.startswith(f"erstwhile.{code}: "), (arguments, message)
        long = await kit.refused(
            session, "search_memories", {"query": "x", "namespace": "n" * 20_000}
        )
        assert long.startswith("erstwhile.auth.forbidden: ") and len(long) < 300


def test_without_a_known_token_mcp_answers_401(served: Served) -> None:
    hello = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "anonymous", "version": "1"}},
    }  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream"}
    for authorization in (None, "Bearer mst_not-a-token", "Basic abc"):
        sent = {**headers, "Authorization": authorization} if authorization else headers
        answer = httpx.post(served.url, json=hello, headers=sent, timeout=30)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "erstwhile.auth.unauthenticated"
    # a session belongs to the token that opened it
    opened = httpx.post(
        served.url, json=hello,
        headers={**headers, "Authorization": f"Bearer {served.secrets['writer']}"}, timeout=30,
    )  # fmt: skip
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    borrowed = httpx.post(
        served.url, json=listing, timeout=30,
        headers={**headers, "Authorization": f"Bearer {served.secrets['agent']}",
                 "mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"},
    )  # fmt: skip
    assert borrowed.status_code == 404

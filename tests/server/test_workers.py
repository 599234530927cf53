"""``erstwhile serve --workers N``: N processes over one database, one REST port and one
gRPC port, started, replaced and stopped by the supervisor (real processes, real HTTP
and gRPC; the SQLite file and a real PostgreSQL)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import grpc
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc import semantic_pb2_grpc
from mcp import Client

from .harness import Server, run_cli, start_server, write_config

WORKERS = 2


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def worker_pids(server: Server) -> set[int]:
    """The workers the supervisor started (its log names each)."""
    started = [e["msg"].split()[1] for e in server.logs() if e.get("msg", "").endswith(" started")]
    return {int(pid) for pid in started if pid.isdigit()}


def served_by(server: Server) -> set[int]:
    """The workers that logged a request line."""
    return {e["worker"] for e in server.logs() if e.get("msg") == "request" and "worker" in e}


@pytest.fixture
def workers(tmp_path: Path, store_target: str) -> Iterator[Server]:
    server = start_server(
        store_target, write_config(tmp_path / "m.toml"), "--no-auth", "--workers", str(WORKERS),
        env={**os.environ, "ERSTWHILE_EMBEDDER": "hash"},
    )  # fmt: skip
    try:
        yield server
    finally:
        server.stop()


def search_hits(url: str, query: str) -> list[str]:
    # a fresh connection per request, so the kernel may hand each to any worker
    with httpx.Client(base_url=url, timeout=60, headers={"Connection": "close"}) as http:
        response = http.post("/v1/namespaces/n/search", json={"query": query, "top_k": 50})
        response.raise_for_status()
        return [hit["record"]["id"] for hit in response.json()["hits"]]


def test_workers_share_the_database_the_rest_port_and_the_grpc_port(workers: Server) -> None:
    assert len(worker_pids(workers)) == WORKERS
    assert worker_pids(workers) <= children(workers.process.pid)

    # concurrent writers on different connections (so, workers): every write lands once
    def write(i: int) -> None:
        with httpx.Client(base_url=workers.url, timeout=60, headers={"Connection": "close"}) as h:
            body = {"records": [{"id": f"r{i}", "content": f"shared fact number {i}"}]}
            h.post("/v1/namespaces/n/records", json=body).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(40)))
    with grpc.insecure_channel(workers.grpc_target) as channel:
        stub = semantic_pb2_grpc.SemanticStub(channel)
        stub.Upsert(
            pb.UpsertRequest(
                namespace="n", records=[pb.Record(id="g", content="shared fact grpc")]
            ),
            timeout=60,
        )
    expected = {f"r{i}" for i in range(40)} | {"g"}
    deadline = time.monotonic() + 60
    with ThreadPoolExecutor(8) as pool:
        while len(served_by(workers)) < WORKERS and time.monotonic() < deadline:
            for hits in pool.map(lambda _: search_hits(workers.url, "shared fact"), range(16)):
                assert set(hits) == expected  # each worker reads what any other wrote
    assert len(served_by(workers)) == WORKERS, "every worker answered requests"


def test_mcp_through_workers_is_sessionless_and_works(workers: Server) -> None:
    """Workers serve MCP without sessions (a session would live in one process): calls
    from clients whose connections spread over both workers all succeed."""

    async def one_client(found: list[str]) -> None:
        # "Connection: close": each call on a new connection, which either worker may take
        http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(30, read=120), headers={"Connection": "close"}
        )
        async with Client(streamable_http_client(workers.url + "/mcp", http_client=http)) as c:
            for _ in range(5):
                result = await c.call_tool("search_memories", {"namespace": "n", "query": "MCP"})
                found.append(str(result.structured_content))

    async def rounds() -> list[str]:
        found: list[str] = []
        async with Client(streamable_http_client(workers.url + "/mcp")) as c:
            await c.call_tool("add_memory", {"namespace": "n", "content": "the workers speak MCP"})
        for _ in range(10):  # bounded: until both workers have answered MCP calls
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(one_client, found)
            if len(mcp_served_by(workers)) == WORKERS:
                break
        return found

    found = anyio.run(rounds)
    assert len(mcp_served_by(workers)) == WORKERS
    assert found and all("the workers speak MCP" in text for text in found)


def mcp_served_by(server: Server) -> set[int]:
    return {
        e["worker"]
        for e in server.logs()
        if e.get("msg") == "request" and e.get("path") == "/mcp" and "worker" in e
    }


def test_a_dead_worker_is_replaced_and_sigterm_stops_them_all(workers: Server) -> None:
    before = worker_pids(workers)
    assert len(before) == WORKERS and before <= children(workers.process.pid)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    workers.wait_for_log(lambda e: "starting another" in e.get("msg", ""), timeout=60)
    deadline = time.monotonic() + 60
    while len(worker_pids(workers) - {victim}) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the supervisor's replacement, bounded
    now = worker_pids(workers) - {victim}
    assert len(now) == WORKERS and now <= children(workers.process.pid)
    assert not alive(victim)
    # the replacement serves: every request succeeds, whichever worker takes it
    for _ in range(10):
        search_hits(workers.url, "anything")
    workers.process.send_signal(signal.SIGTERM)
    assert workers.process.wait(timeout=60) == -signal.SIGTERM
    assert not any(alive(pid) for pid in now)


def test_workers_refuse_a_bad_count_and_a_taken_grpc_port(tmp_path: Path) -> None:
    done = run_cli(tmp_path / "m.db", "serve", "--workers", "0")
    assert done.returncode == 2 and "error: erstwhile.input.invalid:" in done.stderr
    assert "--workers" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(
            tmp_path / "m.db", "serve", "--no-auth", "--workers", "2", "--grpc-port", str(port),
            "--port", "1",
        )  # fmt: skip
    assert done.returncode == 2
    assert f"server.grpc_port: cannot listen on 127.0.0.1:{port}" in done.stderr

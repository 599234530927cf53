"""``erstwhile mcp`` as a real subprocess on a real SQLite file: the SDK's ``Client``
over stdio, and the raw stream, where stdout must carry nothing but protocol."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import erstwhile
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio


def server(kit: Any, db: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=kit.erstwhile_script(),
        args=["--db", str(db), "--embedder", "hash", "mcp", *options],
    )


async def test_a_stdio_session_lives_a_memory_and_survives_bad_calls(
    tmp_path: Path, kit: Any
) -> None:
    db = tmp_path / "stdio.db"
    async with Client(server(kit, db)) as session:
        assert len((await session.list_tools()).tools) == 6
        await kit.memory_flow(session)
        await kit.bad_arguments_then_serving(session)
    with erstwhile.open(db, embedder="hash", background_jobs=False) as memory:
        kept = memory.search("default", "still serving", ranking="lexical")
        assert [hit.record.content for hit in kept.hits] == ["still serving"]


async def test_read_only_and_a_fixed_namespace(tmp_path: Path, kit: Any) -> None:
    db = tmp_path / "stdio.db"
    with erstwhile.open(db, embedder="hash", background_jobs=False) as memory:
        memory.add("agent", "The user prefers short answers")
    async with Client(server(kit, db, "--read-only", "--namespace", "agent")) as session:
        assert {t.name for t in (await session.list_tools()).tools} == {
            "search_memories", "get_memory", "memory_history",
        }  # fmt: skip
        found = await kit.tool(session, "search_memories", {"query": "answers"})
        assert kit.contents(found) == ["The user prefers short answers"]
        message = await kit.refused(session, "add_memory", {"content": "x"})
        assert message.startswith("erstwhile.auth.forbidden: ")


def rpc(id: int | None, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return json.dumps(message) + "\n"


def test_stdout_carries_only_protocol_messages(tmp_path: Path, kit: Any) -> None:
    """Reads the raw stream of a session that writes, searches, fails and reads: every
    line on stdout is one JSON-RPC message answering a request, in order."""
    calls = [
        ("tools/list", {}),
        ("tools/call", {"name": "add_memory", "arguments": {"content": "The sky is blue"}}),
        ("tools/call", {"name": "add_memory", "arguments": {"content": "x", "valid_from": "?"}}),
        ("tools/call", {"name": "search_memories", "arguments": {"query": "sky"}}),
        ("tools/call", {"name": "get_memory", "arguments": {"id": "missing"}}),
        ("tools/call", {"name": "no_such_tool", "arguments": {}}),
        ("ping", None),
    ]
    log = (tmp_path / "stderr.log").open("w")
    process = subprocess.Popen(
        [kit.erstwhile_script(), "--db", str(tmp_path / "raw.db"), "--embedder", "hash", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    }
    lines: list[str] = []
    try:
        process.stdin.write(rpc(0, "initialize", hello))
        process.stdin.flush()
        lines.append(process.stdout.readline())
        process.stdin.write(rpc(None, "notifications/initialized"))
        for id, (method, params) in enumerate(calls, start=1):
            # one request at a time: closing stdin ends the session, answered or not
            process.stdin.write(rpc(id, method, params))
            process.stdin.flush()
            lines.append(process.stdout.readline())
        process.stdin.close()
        lines.extend(process.stdout.readlines())  # up to EOF: the server has exited
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    assert process.returncode == 0, (tmp_path / "stderr.log").read_text()

    messages = [json.loads(line) for line in lines]  # every line is JSON ...
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    for message in messages:  # ... and a JSON-RPC 2.0 response, never anything else
        assert message["jsonrpc"] == "2.0"
        assert ("result" in message) != ("error" in message), message
    assert [m["id"] for m in messages] == list(range(len(calls) + 1))
    assert messages[0]["result"]["serverInfo"]["name"] == "erstwhile"
    assert len(messages[1]["result"]["tools"]) == 6
    results = [m["result"] for m in messages[2:7]]
    assert [r.get("isError", False) for r in results] == [False, True, False, True, True]
    assert results[1]["content"][0]["text"].startswith("erstwhile.input.invalid: valid_from")
    assert results[2]["structuredContent"]["hits"][0]["record"]["content"] == "The sky is blue"
    assert results[3]["content"][0]["text"].startswith("erstwhile.not_found: ")

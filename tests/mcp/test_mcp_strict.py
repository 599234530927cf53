"""MCP tool arguments are taken with their JSON types as sent (issue 14, defect 6)."""

from __future__ import annotations

from typing import Any

import pytest

import erstwhile
from erstwhile.adapters.mcp import build_mcp_server
from mcp import Client

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("search_memories", {"query": "car", "top_k": "10"}, "top_k"),
        ("search_memories", {"query": "car", "include_historical": 1}, "include_historical"),
        ("search_memories", {"query": "car", "include_historical": "yes"}, "include_historical"),
        ("search_memories", {"query": 5}, "query"),
        ("get_memory", {"id": "car", "version": "1"}, "version"),
        ("get_memory", {"id": "car", "version": 2**63}, "version"),
        ("add_memory", {"content": "x", "tags": "a"}, "tags"),
    ],
)
async def test_wrong_json_types_are_refused(
    memory: erstwhile.Memory, kit: Any, name: str, arguments: dict[str, Any], field: str
) -> None:
    memory.add("default", "I drive a red car", id="car")
    async with Client(build_mcp_server(memory.service)) as session:
        message = await kit.refused(session, name, arguments)
        assert message.startswith("erstwhile.input.invalid") or "not_found" in message
        assert field in message or "not_found" in message
        found = await kit.tool(session, "search_memories", {"query": "car", "top_k": 10})
    assert len(found["hits"]) == 1  # the refused calls changed nothing

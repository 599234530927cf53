"""Fixtures for the MCP tests, which use the SDK's own ``Client``: against an in-memory
server, a real ``erstwhile mcp`` subprocess (stdio) and a real ``erstwhile serve``
(streamable HTTP).

The helpers are served by the ``kit`` fixture, since this folder cannot be a package
(it would shadow the SDK's ``mcp``): ``kit.tool`` and ``kit.refused`` call a tool and
unwrap the answer; ``kit.memory_flow`` is the acceptance story (add, search, revise,
search now and as of before the revision, history, forget) every transport runs.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from tests.support.scripts import erstwhile_script

from mcp import Client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def tool(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    """Calls a tool that must succeed; returns its structured content."""
    result = await client.call_tool(name, arguments or {})
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    assert not result.is_error, (name, arguments, text)
    assert result.structured_content is not None, (name, text)
    return result.structured_content


async def refused(client: Client, name: str, arguments: dict[str, Any] | None = None) -> str:
    """Calls a tool that must fail; returns the message the model reads."""
    result = await client.call_tool(name, arguments or {})
    assert result.is_error, (name, arguments, result.structured_content)
    assert result.structured_content is None
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def contents(found: dict[str, Any]) -> list[str]:
    return [hit["record"]["content"] for hit in found["hits"]]


async def memory_flow(client: Client, namespace: str | None = None) -> None:
    """Add, search, revise, search now and as of before the revision, read the history,
    forget: the life of one memory, through the tools only."""
    where = {"namespace": namespace} if namespace else {}
    added = await tool(
        client,
        "add_memory",
        {
            "content": "The user drives a red car",
            "key": "user.car",
            "tags": ["car"],
            "kind": "fact",
            "metadata": {"confidence": 0.9},
            "valid_from": "2024-01-01",
            "source": "conversation 1",
            **where,
        },
    )
    old_id = added["id"]
    assert added["version"] == 1
    found = await tool(client, "search_memories", {"query": "car", **where})
    assert [hit["record"]["id"] for hit in found["hits"]] == [old_id]
    assert found["hits"][0]["record"]["metadata"] == {"confidence": "0.9"}

    revised = await tool(
        client,
        "revise_memory",
        {"id": old_id, "content": "The user drives a blue car", "valid_from": "2024-06-01",
         **where},
    )  # fmt: skip
    new_id = revised["id"]
    assert revised["replaced"] == old_id and new_id != old_id

    now = await tool(client, "search_memories", {"query": "car", **where})
    assert contents(now) == ["The user drives a blue car"]
    current = now["hits"][0]["record"]
    # the revision keeps what it did not change, and takes over the key
    assert (current["key"], current["kind"], current["tags"]) == ("user.car", "fact", ["car"])
    assert current["supersedes"] == [old_id]

    before = await tool(client, "search_memories", {"query": "car", "as_of": "2024-03-01", **where})
    assert contents(before) == ["The user drives a red car"]
    during = await tool(
        client,
        "search_memories",
        {"query": "car", "from": "2024-01-01", "until": "2025-01-01", **where},
    )
    assert sorted(contents(during)) == ["The user drives a blue car", "The user drives a red car"]

    history = await tool(client, "memory_history", {"id": new_id, **where})
    versions = history["versions"]
    assert [v["id"] for v in versions] == [old_id, new_id]
    assert versions[0]["valid_to"] == versions[1]["valid_from"] == "2024-06-01T00:00:00.000000Z"
    assert versions[0]["superseded_by"] == new_id
    assert "valid_to" not in versions[1]  # unset optional fields are absent, not null

    forgotten = await tool(client, "forget_memory", {"id": new_id, **where})
    assert forgotten["forgotten"] is True
    assert contents(await tool(client, "search_memories", {"query": "car", **where})) == []
    everything = await tool(
        client, "search_memories", {"query": "car", "include_historical": True, **where}
    )
    assert len(everything["hits"]) == 2
    gone = await tool(client, "get_memory", {"id": new_id, **where})
    assert gone["deleted_at"] and gone["content"] == "The user drives a blue car"
    await tool(client, "forget_memory", {"id": new_id, **where})  # idempotent


async def bad_arguments_then_serving(client: Client) -> None:
    """A bad call is an ``isError`` result naming the code and the field; the session
    goes on serving."""
    message = await refused(client, "search_memories", {"query": "car", "top_k": 0})
    assert message.startswith("erstwhile.input.invalid: ") and "top_k" in message
    message = await refused(client, "add_memory", {"content": "x", "valid_from": "soon"})
    assert message.startswith("erstwhile.input.invalid: ") and "valid_from" in message
    message = await refused(client, "get_memory", {"id": "no-such-memory"})
    assert message.startswith("erstwhile.not_found: ")
    added = await tool(client, "add_memory", {"content": "still serving"})
    got = await tool(client, "get_memory", {"id": added["id"]})
    assert got["content"] == "still serving"


@pytest.fixture(scope="session")
def kit() -> Any:
    return SimpleNamespace(
        tool=tool,
        refused=refused,
        contents=contents,
        memory_flow=memory_flow,
        bad_arguments_then_serving=bad_arguments_then_serving,
        erstwhile_script=erstwhile_script,
    )

"""The MCP tools, through the SDK's ``Client`` against a server in this process, over a
real SQLite file (the ``memory`` fixture, hash embedder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import erstwhile
from erstwhile.adapters.mcp import build_mcp_server
from mcp import Client

pytestmark = pytest.mark.anyio

READ = {"search_memories", "get_memory", "memory_history"}
WRITE = {"add_memory", "revise_memory", "forget_memory"}


def client(memory: erstwhile.Memory, **options: Any) -> Client:
    return Client(build_mcp_server(memory.service, **options))


async def test_lists_six_tools_with_schemas_titles_and_honest_hints(
    memory: erstwhile.Memory,
) -> None:
    async with client(memory) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == READ | WRITE
    for tool in tools.values():
        assert tool.title and tool.description and len(tool.description) > 150
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert "namespace" in tool.input_schema["properties"]
    for name in READ:
        assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
    hints = {
        name: (
            tools[name].annotations.read_only_hint,  # type: ignore[union-attr]
            tools[name].annotations.destructive_hint,  # type: ignore[union-attr]
            tools[name].annotations.idempotent_hint,  # type: ignore[union-attr]
        )
        for name in WRITE
    }
    assert hints == {
        "add_memory": (False, False, False),
        "revise_memory": (False, True, False),
        "forget_memory": (False, True, True),
    }

    search = tools["search_memories"].input_schema
    assert set(search["properties"]) == {
        "query", "namespace", "top_k", "ranking", "tags", "kind", "filter",
        "as_of", "from", "until", "include_historical", "known_at", "expand", "min_trust",
    }  # fmt: skip
    assert search["required"] == ["query"]
    assert search["properties"]["ranking"]["enum"] == ["auto", "lexical", "semantic", "hybrid"]
    assert search["properties"]["top_k"]["minimum"] == 1
    for time_option in ("as_of", "from", "until", "include_historical"):
        assert search["properties"][time_option]["description"]
        assert time_option in tools["search_memories"].description
    add = tools["add_memory"].input_schema
    assert set(add["properties"]) == {
        "content", "namespace", "tags", "kind", "key", "metadata", "valid_from", "source",
    }  # fmt: skip
    assert add["required"] == ["content"]
    assert tools["revise_memory"].input_schema["required"] == ["id", "content"]
    assert tools["forget_memory"].input_schema["required"] == ["id"]
    assert "hits" in tools["search_memories"].output_schema["properties"]  # type: ignore[index]


async def test_the_life_of_a_memory(memory: erstwhile.Memory, kit: Any) -> None:
    async with client(memory) as session:
        await kit.memory_flow(session)
    # the tools wrote through the service: the Python API sees the same records
    assert memory.search("default", "car", include_historical=True).ids() != []


async def test_a_read_only_server_lists_and_allows_only_the_read_tools(
    memory: erstwhile.Memory, kit: Any
) -> None:
    kept = memory.add("default", "The user likes tea")
    async with client(memory, read_only=True) as session:
        assert {t.name for t in (await session.list_tools()).tools} == READ
        assert "read-only" in (session.instructions or "")
        for name, arguments in [
            ("add_memory", {"content": "x"}),
            ("revise_memory", {"id": kept, "content": "The user likes coffee"}),
            ("forget_memory", {"id": kept}),
        ]:
            message = await kit.refused(session, name, arguments)
            assert message.startswith("erstwhile.auth.forbidden: ") and "read-only" in message
        found = await kit.tool(session, "search_memories", {"query": "tea"})
        assert kit.contents(found) == ["The user likes tea"]
    assert memory.get("default", kept).superseded_by is None
    assert memory.get("default", kept).deleted_at is None
    assert memory.search("default", "coffee", ranking="lexical").hits == []


BAD_CALLS = [
    ("search_memories", {"query": "car", "top_k": 0}, "top_k"),
    ("search_memories", {"query": "car", "top_k": "many"}, "top_k"),
    ("search_memories", {"query": "car", "ranking": "best"}, "ranking"),
    ("search_memories", {"query": "car", "as_of": "yesterday"}, "as_of"),
    ("search_memories", {"query": "car", "from": "2024-01-01"}, "until"),
    ("search_memories", {"query": "car", "until": "2024-01-01"}, "from"),
    ("search_memories", {"query": "car", "from": "2024-02-01", "until": "2024-01-01"}, "from"),
    ("search_memories", {"query": "car", "as_of": "2024-01-01", "include_historical": True},
     "mutually exclusive"),
    ("search_memories", {"query": "car", "namespce": "x"}, "namespce"),
    ("search_memories", {}, "query is required"),
    ("search_memories", {"query": "car", "namespace": "Not A Namespace"}, "namespace"),
    ("add_memory", {"content": ""}, "content"),
    ("add_memory", {"content": "x", "valid_from": "soon"}, "valid_from"),
    ("add_memory", {"content": "x", "tags": [""]}, "tags"),
    ("add_memory", {"content": "x", "metadata": {"n": [1]}}, "metadata"),
    ("get_memory", {"id": "x", "version": 0}, "version"),
    ("no_such_tool", {}, "search_memories"),
]  # fmt: skip


async def test_bad_arguments_are_errors_that_name_the_field_and_serving_goes_on(
    memory: erstwhile.Memory, kit: Any
) -> None:
    async with client(memory) as session:
        for name, arguments, named in BAD_CALLS:
            message = await kit.refused(session, name, arguments)
            assert message.startswith("erstwhile.input.invalid: "), (name, arguments, message)
            assert named in message, (name, arguments, message)
        await kit.bad_arguments_then_serving(session)
    everything = memory.search("default", "x", ranking="semantic", include_historical=True)
    assert [hit.record.content for hit in everything.hits] == ["still serving"]  # nothing else


async def test_domain_refusals_carry_their_codes(memory: erstwhile.Memory, kit: Any) -> None:
    async with client(memory) as session:
        first = await kit.tool(session, "add_memory", {"content": "a", "key": "user.car"})
        message = await kit.refused(session, "add_memory", {"content": "b", "key": "user.car"})
        assert message.startswith("erstwhile.write.conflict: ")
        await kit.tool(session, "revise_memory", {"id": first["id"], "content": "c"})
        # a memory already revised cannot be revised again: chains never fork
        message = await kit.refused(session, "revise_memory", {"id": first["id"], "content": "d"})
        assert message.startswith("erstwhile.write.conflict: ")
        for name in ("get_memory", "memory_history", "forget_memory"):
            message = await kit.refused(session, name, {"id": "missing"})
            assert message.startswith("erstwhile.not_found: ")
        message = await kit.refused(session, "revise_memory", {"id": "missing", "content": "x"})
        assert message.startswith("erstwhile.not_found: ")


async def test_a_promise_that_cannot_be_kept_is_refused(tmp_path: Path, kit: Any) -> None:
    with erstwhile.open(tmp_path / "lexical.db", embedder="none", background_jobs=False) as m:
        m.add("default", "The user drives a red car")
        async with client(m) as session:
            message = await kit.refused(
                session, "search_memories", {"query": "car", "ranking": "semantic"}
            )
            assert message.startswith("erstwhile.search.semantic_unavailable: ")
            found = await kit.tool(session, "search_memories", {"query": "car"})
            assert found["ranking"] == "lexical" and len(found["hits"]) == 1
            assert found["warnings"][0].startswith("semantic_unavailable: ")


async def test_the_server_namespace_is_the_default_and_a_call_may_name_another(
    memory: erstwhile.Memory, kit: Any
) -> None:
    async with client(memory, namespace="agent") as session:
        assert "Default namespace: agent" in (session.instructions or "")
        mine = await kit.tool(session, "add_memory", {"content": "The project uses Go"})
        assert mine["namespace"] == "agent"
        other = await kit.tool(
            session, "add_memory", {"content": "The project uses Rust", "namespace": "other"}
        )
        assert other["namespace"] == "other"
        found = await kit.tool(session, "search_memories", {"query": "project"})
        assert kit.contents(found) == ["The project uses Go"]
        await kit.memory_flow(session, namespace="third")
    assert memory.get("agent", mine["id"]).content == "The project uses Go"
    assert memory.get("other", other["id"]).content == "The project uses Rust"


async def test_revise_keeps_what_it_is_not_given_and_replaces_what_it_is(
    memory: erstwhile.Memory, kit: Any
) -> None:
    old = memory.add(
        "default", "Standup at 9", kind="decision", tags=["team"], metadata={"room": "a"},
        source="meeting 1",
    )  # fmt: skip
    async with client(memory) as session:
        kept = await kit.tool(session, "revise_memory", {"id": old, "content": "Standup at 10"})
        changed = await kit.tool(
            session,
            "revise_memory",
            {"id": kept["id"], "content": "Standup at 11", "tags": ["ops"], "kind": "note",
             "metadata": {"room": 7}, "source": "meeting 2"},
        )  # fmt: skip
    first = memory.get("default", kept["id"])
    assert (first.kind, first.tags, first.metadata, first.source) == (
        "decision", ["team"], {"room": "a"}, "meeting 1",
    )  # fmt: skip
    second = memory.get("default", changed["id"])
    assert (second.kind, second.tags, second.metadata, second.source) == (
        "note", ["ops"], {"room": "7"}, "meeting 2",
    )  # fmt: skip
    assert [r.content for r in memory.history("default", old)] == [
        "Standup at 9", "Standup at 10", "Standup at 11",
    ]  # fmt: skip


async def test_search_scopes_and_structured_output(memory: erstwhile.Memory, kit: Any) -> None:
    memory.add("default", "Deploy on Fridays is banned", tags=["ops", "rule"], kind="decision",
               metadata={"team": "infra"})  # fmt: skip
    memory.add("default", "Deploy checklist lives in the wiki", tags=["ops"])
    async with client(memory) as session:
        both = await kit.tool(session, "search_memories", {"query": "deploy", "ranking": "lexical"})
        assert both["ranking"] == "lexical" and len(both["hits"]) == 2
        assert all("lexical" in hit["signals"] for hit in both["hits"])
        for scope in ({"tags": ["rule"]}, {"kind": "decision"}, {"filter": {"team": "infra"}}):
            found = await kit.tool(session, "search_memories", {"query": "deploy", **scope})
            assert kit.contents(found) == ["Deploy on Fridays is banned"], scope
        top = await kit.tool(session, "search_memories", {"query": "deploy", "top_k": 1})
        assert len(top["hits"]) == 1
        record = top["hits"][0]["record"]
        assert None not in record.values()  # unset optional fields are absent, not null
        assert {"id", "namespace", "content", "valid_from", "created_at", "version"} <= set(record)
        assert "payload" not in record and "vector" not in record


async def test_search_memories_expands_through_the_graph(
    memory: erstwhile.Memory, kit: Any
) -> None:
    memory.add("default", "Ada reviews the budget", id="seed", kind="decision")
    memory.add("default", "a separate note", id="other", kind="decision")
    memory.mention("default", "seed", ["Ada"])
    memory.mention("default", "other", ["Apollo"])
    memory.assert_fact("default", "Ada", "works on", "Apollo", valid_from="2020-01-01")
    async with client(memory) as session:
        plain = await kit.tool(
            session, "search_memories", {"query": "budget", "ranking": "lexical"}
        )
        found = await kit.tool(
            session, "search_memories", {"query": "budget", "ranking": "lexical", "expand": True}
        )
    assert kit.contents(plain) == ["Ada reviews the budget"]
    assert kit.contents(found) == ["Ada reviews the budget", "a separate note"]
    assert found["hits"][1]["signals"] == {"graph": {"hops": 1, "from": "seed"}}
    assert found["hits"][1]["via"][0]["predicate"] == "works on"


async def test_search_memories_reads_the_past_with_known_at(
    memory: erstwhile.Memory, kit: Any
) -> None:
    first = memory.add("default", "the launch is on june ten")
    recorded = memory.get("default", first).updated_at
    memory.supersede("default", first, {"content": "the launch moved to june seventeen"})
    async with client(memory) as session:
        now = await kit.tool(session, "search_memories", {"query": "launch", "ranking": "lexical"})
        then = await kit.tool(
            session, "search_memories",
            {"query": "launch", "ranking": "lexical", "known_at": recorded.isoformat()},
        )  # fmt: skip
    assert kit.contents(now) == ["the launch moved to june seventeen"]
    assert kit.contents(then) == ["the launch is on june ten"]


async def test_memory_history_lists_every_version_with_its_record_time_on_request(
    memory: erstwhile.Memory, kit: Any
) -> None:
    first = memory.add("default", "the launch is on june ten")
    memory.upsert("default", [{"id": first, "content": "the launch is on june eleven"}])
    memory.supersede("default", first, {"content": "the launch moved to june seventeen"})
    async with client(memory) as session:
        chain = await kit.tool(session, "memory_history", {"id": first})
        every = await kit.tool(session, "memory_history", {"id": first, "versions": True})
    assert [v["version"] for v in chain["versions"]] == [3, 1]
    assert all(v.get("known_until") is None for v in chain["versions"])  # current
    versions = every["versions"]
    assert [v["content"] for v in versions] == [
        "the launch is on june ten", "the launch is on june eleven",
        "the launch is on june eleven", "the launch moved to june seventeen",
    ]  # fmt: skip
    assert [v["known_until"] for v in versions[:2]] == [v["updated_at"] for v in versions[1:3]]
    assert versions[2].get("known_until") is None and versions[3].get("known_until") is None

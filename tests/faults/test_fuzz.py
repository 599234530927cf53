"""Hypothesis-driven hostile input over the wire: malformed JSON, wrong types, huge and
non-finite numbers, unknown and server-owned fields, odd path segments, raw bytes.
Every answer is below 500 with the SPEC §13 shape, and a refused request leaves the
store exactly as it was (the namespace's export is byte-identical before and after).

REST goes through a real ``erstwhile serve``; MCP through the official SDK client
against the server in this process.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any
from urllib.parse import quote

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.faults.figures import FIGURES
from tests.faults.server import Secrets, assert_answer
from tests.server.harness import Server

import erstwhile
from erstwhile import backups
from erstwhile.adapters.mcp import build_mcp_server
from mcp import Client

# bounded for CI; ERSTWHILE_FUZZ_EXAMPLES=2000 hunts harder by hand
EXAMPLES = int(os.environ.get("ERSTWHILE_FUZZ_EXAMPLES", "60"))
NS = "fuzz"
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, 10**30, 1e39, -1e39, 1e308, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
)
instants = st.sampled_from(["2024-01-01", "2030-01-01T00:00:00Z", "0001-01-01", "9999-12-31",
                            "2024-02-30", "2024-01-01T25:00:00Z", "1e9", ""])  # fmt: skip
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=20), instants)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# (method, path under /v1/namespaces/{ns}, a valid body) — mutated by the strategy
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "records", {"records": [{"id": "a", "content": "fuzz target", "tags": ["t"],
                                      "metadata": {"k": "v"}, "valid_from": "2024-01-01"}]}),
    ("POST", "search", {"query": "fuzz", "top_k": 3, "ranking": "lexical"}),
    ("POST", "search", {"query_vector": [1.0] * 256, "ranking": "semantic"}),
    ("POST", "expire", {"filter": {"k": "v"}, "action": "invalidate", "max_rows": 1}),
    ("POST", "records/a/invalidate", {"at": "2030-01-01"}),
    ("POST", "records/a/verify", {"reviewer": "me"}),
    ("PUT", "records/a/embedding", {"vector": [1.0] * 256}),
]  # fmt: skip
FIELDS = [
    "id", "content", "tags", "metadata", "valid_from", "valid_to", "key", "supersedes",
    "vector", "payload", "if_version", "trust", "version", "created_at", "superseded_by",
    "query", "top_k", "candidate_k", "between", "as_of", "predicates", "filter",
    "include_historical", "ids_only", "max_rows", "action", "at", "reviewer", "expand",
]  # fmt: skip


def _mutate(body: Any, data: st.DataObject) -> Any:
    """One hostile change to a valid body: a field set to anything, an extra field, or
    the same change one level down (inside ``records[0]``)."""
    target = body
    if "records" in body and data.draw(st.booleans()):
        target = body["records"][0]
    # mostly the route's own fields (deep checks), sometimes any known field (refusals)
    field = data.draw(st.sampled_from([*target.keys()] * 3 + FIELDS))
    target[field] = data.draw(values)
    return body


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes]:
    method, path, body = draw(st.sampled_from(ROUTES))
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "any json", "bytes", "path"]))
    body = json.loads(json.dumps(body))
    if kind == "any json":
        raw = json.dumps(draw(values)).encode()
    elif kind == "bytes":
        raw = draw(st.binary(max_size=200))
    else:
        raw = json.dumps(_mutate(body, draw(st.data()))).encode()  # NaN/Infinity stay in
    if kind == "path":
        segment = draw(st.text(min_size=1, max_size=30))
        path = path.replace("records/a", "records/" + quote(segment, safe=""))
    return method, path, raw


def _export(server: Server) -> list[str]:
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as m:
        return list(backups.export_lines(m, NS))


def test_rest_hostile_input(served: tuple[Server, Secrets]) -> None:
    server, secrets = served
    with server.http(secrets.admin) as client:
        seed = client.post(f"/v1/namespaces/{NS}/records",
                           json={"records": [{"id": "a", "content": "fuzz target",
                                              "metadata": {"k": "v"}}]})  # fmt: skip
        assert seed.status_code == 200, seed.text
        state = {"before": _export(server)}

        @given(request=requests())
        @SETTINGS
        def probe(request: tuple[str, str, bytes]) -> None:
            method, path, raw = request
            response = client.request(
                method, f"/v1/namespaces/{NS}/{path}", content=raw,
                headers={"content-type": "application/json"},
            )  # fmt: skip
            assert_answer(response)
            FIGURES.add("fuzz requests")
            after = _export(server)
            if response.status_code >= 400:
                FIGURES.add("fuzz refusals (REST)")
                assert after == state["before"], (method, path, raw[:200], response.text)
            state["before"] = after

        probe()


# -- MCP ------------------------------------------------------------------------------

TOOLS: dict[str, dict[str, Any]] = {
    "search_memories": {"query": "fuzz", "top_k": 3},
    "get_memory": {"id": "a"},
    "memory_history": {"id": "a"},
    "add_memory": {"content": "fuzz added", "tags": ["t"], "valid_from": "2024-01-01"},
    "revise_memory": {"id": "a", "content": "fuzz revised"},
    "forget_memory": {"id": "a"},
}
MCP_FIELDS = ["query", "top_k", "ranking", "tags", "kind", "filter", "as_of", "from", "until",
              "include_historical", "id", "version", "content", "key", "metadata",
              "valid_from", "source", "namespace", "bogus"]  # fmt: skip


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(TOOLS)))
    arguments = dict(TOOLS[name])
    for _ in range(draw(st.integers(1, 3))):
        value = draw(values)
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)  # a JSON-RPC message cannot carry NaN
        arguments[draw(st.sampled_from([*TOOLS[name]] * 3 + MCP_FIELDS))] = value
    return name, arguments


def test_mcp_hostile_input(tmp_path: Any) -> None:
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as memory:
        memory.add("default", "fuzz target", id="a")
        server = build_mcp_server(memory.service)
        state = {"before": list(backups.export_lines(memory))}

        async def call(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            async with Client(server) as session:
                result = await session.call_tool(name, arguments)
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            return bool(result.is_error), text

        @given(call_=tool_calls())
        @SETTINGS
        def probe(call_: tuple[str, dict[str, Any]]) -> None:
            name, arguments = call_
            is_error, text = anyio.run(call, name, arguments)
            FIGURES.add("fuzz tool calls")
            after = list(backups.export_lines(memory))
            if is_error:
                FIGURES.add("fuzz refusals (MCP)")
                # a coded refusal, never a crash surfaced as "Error executing tool"
                assert text.startswith("erstwhile.") and "internal" not in text, text
                assert after == state["before"], (name, arguments, text)
            state["before"] = after

        probe()

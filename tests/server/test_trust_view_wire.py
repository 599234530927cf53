"""The default trust view on every interface of a real ``erstwhile serve`` configured
with ``[policy] default_view = "verified"`` (and one namespace left open): REST (the
inspector's API), the Python HTTP client, gRPC (ours and the alias path) and MCP over
streamable HTTP each hide unverified records from search, get and history unless the
read widens the view with ``min_trust``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc import semantic_pb2_grpc
from erstwhile.adapters.grpc._generated import alias_pb2, alias_pb2_grpc
from erstwhile.domain.errors import NotFound
from mcp import Client

from .harness import Server, Tokens, make_tokens, start_server
from .test_rest import error_of

CONFIG = """
[embedding]
provider = "hash"

[policy]
default_view = "verified"

[namespaces.open]
default_view = "unverified"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Tokens]]:
    root = tmp_path_factory.mktemp("trust-view")
    config = root / "erstwhile.toml"
    config.write_text(CONFIG)
    running = start_server(root / "server.db", config)
    tokens = make_tokens(running)
    with httpx.Client(base_url=running.url, timeout=30,
                      headers={"Authorization": f"Bearer {tokens.admin}"}) as admin:  # fmt: skip
        for ns in ("kb", "open"):
            written = admin.post(f"/v1/namespaces/{ns}/records", json={"records": [
                {"id": "good", "content": "the deploy runbook, checked"},
                {"id": "rumour", "content": "the deploy runbook, as overheard"},
            ]})  # fmt: skip
            assert written.status_code == 200, written.text
            verified = admin.post(f"/v1/namespaces/{ns}/records/good/verify",
                                  json={"reviewer": "ops"})  # fmt: skip
            assert verified.status_code == 200, verified.text
    yield running, tokens
    running.stop()


def hit_ids(body: dict[str, Any]) -> list[str]:
    return sorted(hit["record"]["id"] for hit in body["hits"])


def test_rest_and_the_http_client(served: tuple[Server, Tokens]) -> None:
    server, tokens = served
    headers = {"Authorization": f"Bearer {tokens.reader}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as rest:
        search = {"query": "deploy runbook", "ranking": "lexical"}
        assert hit_ids(rest.post("/v1/namespaces/kb/search", json=search).json()) == ["good"]
        wide = rest.post("/v1/namespaces/kb/search", json={**search, "min_trust": "unverified"})
        assert hit_ids(wide.json()) == ["good", "rumour"]
        assert hit_ids(rest.post("/v1/namespaces/open/search", json=search).json()) == [
            "good", "rumour",
        ]  # fmt: skip
        narrow = rest.post("/v1/namespaces/open/search", json={**search, "min_trust": "verified"})
        assert hit_ids(narrow.json()) == ["good"]

        message = error_of(rest.get("/v1/namespaces/kb/records/rumour"), 404, "erstwhile.not_found")
        assert "min_trust unverified" in message
        shown = rest.get("/v1/namespaces/kb/records/rumour", params={"min_trust": "unverified"})
        assert shown.status_code == 200 and shown.json()["trust"] == "unverified"
        assert rest.get("/v1/namespaces/open/records/rumour").status_code == 200
        message = error_of(rest.get("/v1/namespaces/kb/records/good",
                                    params={"min_trust": "maybe"}),
                           400, "erstwhile.input.invalid")  # fmt: skip
        assert "min_trust" in message
        error_of(rest.get("/v1/namespaces/kb/records/rumour/history"), 404, "erstwhile.not_found")
        chain = rest.get("/v1/namespaces/kb/records/rumour/history",
                         params={"min_trust": "unverified"})  # fmt: skip
        assert [r["id"] for r in chain.json()["versions"]] == ["rumour"]

    with erstwhile.Client(server.url, token=tokens.reader) as client:
        assert {h.record.id for h in client.search("kb", "deploy runbook").hits} == {"good"}
        with pytest.raises(NotFound):
            client.get("kb", "rumour")
        assert client.get("kb", "rumour", min_trust="unverified").id == "rumour"
        assert [r.id for r in client.history("kb", "rumour", min_trust="unverified")] == ["rumour"]


def test_grpc_and_its_alias(served: tuple[Server, Tokens]) -> None:
    server, tokens = served
    metadata = (("x-erstwhile-capability", f"Bearer {tokens.reader}"),)
    with grpc.insecure_channel(server.grpc_target) as channel:
        ours = semantic_pb2_grpc.SemanticStub(channel)

        def search(namespace: str, **options: Any) -> list[str]:
            request = pb.SearchRequest(namespace=namespace, query_text="deploy runbook",
                                       mode=pb.SEARCH_MODE_SPARSE, **options)  # fmt: skip
            found = ours.Search(request, metadata=metadata, timeout=30)
            return sorted(hit.record.id for hit in found.hits)

        assert search("kb") == ["good"]
        assert search("kb", min_trust=pb.TRUST_UNVERIFIED) == ["good", "rumour"]
        assert search("open") == ["good", "rumour"]
        assert search("open", min_trust=pb.TRUST_VERIFIED) == ["good"]
        with pytest.raises(grpc.RpcError) as hidden:
            ours.History(pb.HistoryRequest(namespace="kb", id="rumour"), metadata=metadata,
                         timeout=30)  # fmt: skip
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        chain = ours.History(pb.HistoryRequest(namespace="kb", id="rumour",
                                               min_trust=pb.TRUST_UNVERIFIED),
                             metadata=metadata, timeout=30)  # fmt: skip
        assert [r.id for r in chain.versions] == ["rumour"]

        alias = alias_pb2_grpc.SemanticStub(channel)
        seed_header = (("x-mindd-capability", f"Bearer {tokens.reader}"),)
        found = alias.Search(alias_pb2.SearchRequest(namespace="kb", query_text="deploy",
                                                     mode=alias_pb2.SEARCH_MODE_HYBRID),
                             metadata=seed_header, timeout=30)  # fmt: skip
        assert [hit.record.id for hit in found.hits] == ["good"]


def test_mcp(served: tuple[Server, Tokens]) -> None:
    server, tokens = served

    async def session_calls() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens.reader}"},
                                  timeout=httpx2.Timeout(30, read=120))  # fmt: skip
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as mcp:

            async def call(name: str, **arguments: Any) -> Any:
                return await mcp.call_tool(name, arguments)

            found = await call("search_memories", query="deploy runbook", namespace="kb")
            assert hit_ids(found.structured_content) == ["good"]
            wide = await call("search_memories", query="deploy runbook", namespace="kb",
                              min_trust="unverified")  # fmt: skip
            assert hit_ids(wide.structured_content) == ["good", "rumour"]
            hidden = await call("get_memory", id="rumour", namespace="kb")
            assert hidden.is_error
            assert hidden.content[0].text.startswith("erstwhile.not_found")  # type: ignore[union-attr]
            shown = await call("get_memory", id="rumour", namespace="kb", min_trust="unverified")
            assert shown.structured_content["trust"] == "unverified"
            assert (await call("get_memory", id="rumour", namespace="open")).structured_content
            assert (await call("memory_history", id="rumour", namespace="kb")).is_error
            chain = await call("memory_history", id="rumour", namespace="kb",
                               min_trust="unverified")  # fmt: skip
            assert [r["id"] for r in chain.structured_content["versions"]] == ["rumour"]

    anyio.run(session_calls)


def test_the_view_is_read_from_config_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erstwhile.config import load_settings
    from erstwhile.domain.errors import InvalidInput

    config = tmp_path / "erstwhile.toml"
    config.write_text(CONFIG)
    settings = load_settings(config)
    policy = settings.policy.caps(settings.trust_views())
    assert (policy.default_view, dict(policy.views)) == ("verified", {"open": "unverified"})
    monkeypatch.setenv("ERSTWHILE_POLICY__DEFAULT_VIEW", "unverified")
    assert load_settings(config).policy.default_view == "unverified"
    assert load_settings().policy.caps().default_view == "unverified"  # the default
    config.write_text('[policy]\ndefault_view = "trusted"\n')
    monkeypatch.delenv("ERSTWHILE_POLICY__DEFAULT_VIEW")
    with pytest.raises(InvalidInput, match=r"policy\.default_view"):
        load_settings(config)

"""A client compiled from the earlier API's proto, unchanged (proto/mindd/...: its text
as written, compiled here at test time), calls a real ``erstwhile serve`` under that
API's service path with that API's capability header, and gets the answers a client
of erstwhile's own proto gets from ``erstwhile.semantic.v1.Semantic``."""

from __future__ import annotations

import importlib
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc, Tokens, error_code

ROOT = Path(__file__).resolve().parents[2]
SEED_PROTO = "mindd/semantic/v1/semantic.proto"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, ModuleType]]:
    """The earlier API's messages and stub, generated from the repository's copy of its
    proto the way one of its clients would generate them."""
    import grpc_tools
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("seed-stubs")
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    status = protoc.main(["protoc", f"-I{ROOT / 'proto'}", f"-I{well_known}",
                          f"--python_out={out}", f"--grpc_python_out={out}",
                          str(ROOT / "proto" / SEED_PROTO)])  # fmt: skip
    assert status == 0
    sys.path.insert(0, str(out))
    try:
        yield (
            importlib.import_module("mindd.semantic.v1.semantic_pb2"),
            importlib.import_module("mindd.semantic.v1.semantic_pb2_grpc"),
        )
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n == "mindd" or n.startswith("mindd.")]:
            del sys.modules[name]


class SeedClient:
    """The earlier API's stub, sending its own header: ``x-mindd-capability``."""

    def __init__(self, stubs: tuple[ModuleType, ModuleType], channel: grpc.Channel,
                 secret: str | None) -> None:  # fmt: skip
        self.pb, grpc_module = stubs
        self.stub = grpc_module.SemanticStub(channel)
        self.metadata = (("x-mindd-capability", f"Bearer {secret}"),) if secret else ()

    def __getattr__(self, method: str) -> Any:
        call = getattr(self.stub, method)
        return lambda request: call(request, metadata=self.metadata, timeout=60)


def as_float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def same_hits(theirs: Any, ours: pb.SearchResponse) -> None:
    """The alias's answer is ours: the same records byte for byte, each score the same
    number as a float (a float reader of a double reads 0.0: a hit whose score is not
    0.0 tells them apart; a semantic hit sharing no feature with the query scores 0.0)."""
    assert len(theirs.hits) == len(ours.hits) > 0
    for mine, our in zip(theirs.hits, ours.hits, strict=True):
        assert mine.record.SerializeToString() == our.record.SerializeToString()
        assert mine.score == as_float32(our.score)
    assert any(hit.score != 0.0 for hit in theirs.hits)


def test_a_seed_client_calls_every_rpc_and_gets_our_answers(
    seed: tuple[ModuleType, ModuleType], channel: grpc.Channel, tokens: Tokens, ns: str
) -> None:
    spb = seed[0]
    them = SeedClient(seed, channel, tokens.admin)
    us = Rpc(channel, tokens.admin)

    written = them.Upsert(spb.UpsertRequest(namespace=ns, records=[
        spb.Record(id="a", content="apple pie recipe", metadata={"topic": "food"}),
        spb.Record(id="b", content="how to debug a Go panic", metadata={"topic": "code"}),
    ]))  # fmt: skip
    assert (list(written.ids), list(written.versions)) == (["a", "b"], [1, 1])
    twin = us.Upsert(pb.UpsertRequest(namespace=ns + "-ours", records=[
        pb.Record(id="a", content="apple pie recipe", metadata={"topic": "food"}),
        pb.Record(id="b", content="how to debug a Go panic", metadata={"topic": "code"}),
    ]))  # fmt: skip
    assert (list(twin.ids), list(twin.versions)) == (list(written.ids), list(written.versions))

    for mode in ("SEARCH_MODE_UNSPECIFIED", "SEARCH_MODE_DENSE", "SEARCH_MODE_SPARSE",
                 "SEARCH_MODE_HYBRID"):  # fmt: skip
        asked = {"namespace": ns, "query_text": "apple", "top_k": 2}
        theirs = them.Search(spb.SearchRequest(**asked, mode=getattr(spb, mode)))
        ours = us.Search(pb.SearchRequest(**asked, mode=getattr(pb, mode)))
        same_hits(theirs, ours)
        assert theirs.hits[0].record.id == "a"
    ids = them.Search(spb.SearchRequest(namespace=ns, query_text="apple", ids_only=True))
    same_hits(ids, us.Search(pb.SearchRequest(namespace=ns, query_text="apple", ids_only=True)))
    assert ids.hits[0].record.content == ""

    # revise with compare-and-set: "c" supersedes "b" at version 1
    revised = them.Upsert(
        spb.UpsertRequest(
            namespace=ns,
            records=[
                spb.Record(id="c", content="how to debug a Go race", supersedes=["b"], if_version=0)
            ],
        )
    )
    assert list(revised.versions) == [1]
    with pytest.raises(grpc.RpcError) as stale:
        them.Upsert(spb.UpsertRequest(namespace=ns, records=[
            spb.Record(id="c", content="again", if_version=7)]))  # fmt: skip
    assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_code(stale.value) == "erstwhile.write.version_conflict"
    chain = us.History(pb.HistoryRequest(namespace=ns, id="c"))
    assert [r.id for r in chain.versions] == ["b", "c"]

    them.Delete(spb.DeleteRequest(namespace=ns, id="c"))
    audit = {"namespace": ns, "query_text": "debug", "include_invalidated": True}
    theirs = them.Search(spb.SearchRequest(**audit))
    same_hits(theirs, us.Search(pb.SearchRequest(**audit)))
    deleted = {hit.record.id: hit.record.HasField("deleted_at") for hit in theirs.hits}
    assert (deleted["b"], deleted["c"]) == (False, True)
    assert {h.record.id: h.record.HasField("valid_to") for h in theirs.hits}["b"]

    expired = them.Expire(
        spb.ExpireRequest(
            namespace=ns,
            filter={"topic": "food"},
            action=spb.EXPIRE_ACTION_SOFT_DELETE,
            max_rows=100,
        )
    )
    assert expired.affected == 1
    assert not them.Search(spb.SearchRequest(namespace=ns, query_text="apple")).hits
    them.Delete(spb.DeleteRequest(namespace=ns, id="a", hard=True))
    gone = them.Search(spb.SearchRequest(namespace=ns, query_text="apple",
                                         include_invalidated=True))  # fmt: skip
    assert sorted(hit.record.id for hit in gone.hits) == ["b", "c"]  # "a" left no trace


def test_the_alias_fails_as_ours_does(
    seed: tuple[ModuleType, ModuleType], channel: grpc.Channel, tokens: Tokens, ns: str
) -> None:
    spb = seed[0]
    both = spb.SearchRequest(namespace=ns, query_text="q", query_vector=[1.0])
    for client in (SeedClient(seed, channel, tokens.reader), SeedClient(seed, channel, None),
                   SeedClient(seed, channel, "not-a-token")):  # fmt: skip
        with pytest.raises(grpc.RpcError) as failed:
            client.Search(both)
        ours = Rpc(channel, tokens.reader if client.metadata else None)
        with pytest.raises(grpc.RpcError) as twin:
            ours.Search(pb.SearchRequest.FromString(both.SerializeToString()))
        expected = twin.value.code() if "not-a-token" not in str(client.metadata) else (
            grpc.StatusCode.UNAUTHENTICATED
        )  # fmt: skip
        assert failed.value.code() == expected
    with pytest.raises(grpc.RpcError) as forbidden:
        SeedClient(seed, channel, tokens.reader).Upsert(
            spb.UpsertRequest(namespace=ns, records=[spb.Record(content="x")])
        )
    assert forbidden.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_the_seed_header_works_on_our_path_too(channel: grpc.Channel, tokens: Tokens,
                                               ns: str) -> None:  # fmt: skip
    stub = pb_grpc_stub(channel)
    metadata = (("x-mindd-capability", f"Bearer {tokens.writer}"),)
    written = stub.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(content="hi")]),
                          metadata=metadata, timeout=30)  # fmt: skip
    assert list(written.versions) == [1]


def pb_grpc_stub(channel: grpc.Channel) -> Any:
    from erstwhile.adapters.grpc import semantic_pb2_grpc

    return semantic_pb2_grpc.SemanticStub(channel)


def test_the_alias_is_listed_by_reflection_and_health(channel: grpc.Channel) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=30
    )
    names = {s.name for answer in answers for s in answer.list_services_response.service}
    assert {"erstwhile.semantic.v1.Semantic", "mindd.semantic.v1.Semantic"} <= names
    health = health_pb2_grpc.HealthStub(channel)
    status = health.Check(
        health_pb2.HealthCheckRequest(service="mindd.semantic.v1.Semantic"), timeout=30
    )
    assert status.status == health_pb2.HealthCheckResponse.SERVING

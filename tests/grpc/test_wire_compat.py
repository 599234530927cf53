"""Wire compatibility with the earlier Semantic API: messages encoded from a proto
written here, independently of proto/ (the earlier API's field numbers and types,
another package name), decode into erstwhile's messages and domain requests with the
same meaning, and erstwhile's answers decode back; then a client built only on this
proto talks to a real ``erstwhile serve``.

The earlier API's text does not show SearchResponse, Hit or PredicateOp's numbers;
this proto takes them as erstwhile defines them (hits = 1; record = 1, score = 2; the
ops numbered in the order listed, from 1)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest

from erstwhile.adapters.grpc import convert
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record
from erstwhile.domain.search import ExpireAction, Ranking

from .conftest import Tokens

INDEPENDENT = """
syntax = "proto3";
package compat.semantic.v1;
import "google/protobuf/timestamp.proto";

message Record {
  string id = 1;
  string content = 2;
  bytes payload = 3;
  repeated float vector = 4;
  map<string, string> metadata = 5;
  google.protobuf.Timestamp created_at = 6;
  google.protobuf.Timestamp valid_from = 7;
  google.protobuf.Timestamp valid_to = 8;
  google.protobuf.Timestamp deleted_at = 9;
  repeated string supersedes = 10;
  string source = 11;
  uint64 version = 12;
  optional uint64 if_version = 13;
}
message UpsertRequest { string namespace = 1; repeated Record records = 2; }
message UpsertResponse { repeated string ids = 1; repeated uint64 versions = 2; }
enum SearchMode { SM_UNSPECIFIED = 0; SM_DENSE = 1; SM_SPARSE = 2; SM_HYBRID = 3; }
enum PredicateOp { OP_UNSPECIFIED = 0; OP_EQ = 1; OP_NEQ = 2; OP_GT = 3; OP_GTE = 4;
                   OP_LT = 5; OP_LTE = 6; OP_IN = 7; }
message FieldPredicate { string key = 1; PredicateOp op = 2; repeated string values = 3; }
message SearchRequest {
  string namespace = 1;
  string query_text = 2;
  repeated float query_vector = 3;
  uint32 top_k = 4;
  map<string, string> filter = 5;
  bool include_payload = 6;
  bool include_vector = 7;
  google.protobuf.Timestamp as_of = 8;
  bool include_invalidated = 9;
  bool ids_only = 10;
  repeated FieldPredicate predicates = 11;
  google.protobuf.Timestamp created_after = 12;
  google.protobuf.Timestamp created_before = 13;
  SearchMode mode = 14;
  uint32 rerank_candidate_k = 15;
}
message Hit { Record record = 1; double score = 2; }
message SearchResponse { repeated Hit hits = 1; }
message DeleteRequest { string namespace = 1; string id = 2; bool hard = 3; }
message DeleteResponse {}
enum ExpireAction { EA_UNSPECIFIED = 0; EA_INVALIDATE = 1; EA_SOFT_DELETE = 2; EA_HARD_DELETE = 3; }
message ExpireRequest {
  string namespace = 1;
  map<string, string> filter = 2;
  ExpireAction action = 3;
  uint32 max_rows = 4;
}
message ExpireResponse { uint64 affected = 1; }
"""


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    import grpc_tools
    from grpc_tools import protoc

    root = tmp_path_factory.mktemp("independent")
    source = root / "compat" / "semantic_compat.proto"
    source.parent.mkdir()
    source.write_text(INDEPENDENT)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    status = protoc.main(["protoc", f"-I{root}", f"-I{well_known}", f"--python_out={root}",
                          str(source)])  # fmt: skip
    assert status == 0
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("compat.semantic_compat_pb2")
    finally:
        sys.path.remove(str(root))


def stamp(message: Any, text: str) -> None:
    message.FromJsonString(text)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def test_a_record_written_with_their_proto_means_the_same_here(theirs: ModuleType) -> None:
    record = theirs.Record(
        id="r1", content="apple pie", payload=b"\x01\x02", vector=[0.5, -0.25],
        metadata={"topic": "food"}, supersedes=["r0"], source="cursor:9", version=7,
        if_version=0,
    )  # fmt: skip
    stamp(record.created_at, "2020-01-01T00:00:00Z")
    stamp(record.valid_from, "2024-01-01T10:00:00.000123Z")
    stamp(record.valid_to, "2025-01-01T00:00:00Z")
    stamp(record.deleted_at, "2024-06-01T00:00:00Z")
    wire = theirs.UpsertRequest(namespace="notes", records=[record]).SerializeToString()

    ours = pb.UpsertRequest.FromString(wire)
    assert ours.namespace == "notes"
    (domain,) = convert.records(ours.records)
    assert domain.id == "r1" and domain.content == "apple pie" and domain.payload == b"\x01\x02"
    assert domain.vector == [0.5, -0.25] and domain.metadata == {"topic": "food"}
    assert domain.supersedes == ["r0"] and domain.source == "cursor:9" and domain.if_version == 0
    assert domain.valid_from == at("2024-01-01T10:00:00.000123Z")
    assert domain.valid_to == at("2025-01-01T00:00:00Z")
    assert domain.deleted_at == at("2024-06-01T00:00:00Z")
    # server-set on write, as in their API: version and created_at are not taken from input
    assert domain.version is None and domain.created_at is None

    # no if_version on their side = no precondition here (presence survives the wire)
    plain = pb.Record.FromString(theirs.Record(id="r2").SerializeToString())
    assert convert.records([plain])[0].if_version is None


def test_a_record_answered_here_means_the_same_there(theirs: ModuleType) -> None:
    record = Record(
        id="r1", namespace="notes", content="apple pie", payload=b"\x00", metadata={"k": "v"},
        source="s", supersedes=["r0"], version=3, vector=[1.0, 0.0], tags=["x"], key="k1",
        created_at=at("2024-01-01T00:00:00Z"), valid_from=at("2024-01-02T00:00:00.5Z"),
        valid_to=at("2024-02-01T00:00:00Z"), deleted_at=at("2024-03-01T00:00:00Z"),
    )  # fmt: skip
    wire = convert.record_message(record, include_vector=True).SerializeToString()
    back = theirs.Record.FromString(wire)
    assert (back.id, back.content, back.payload, dict(back.metadata), back.source) == (
        "r1", "apple pie", b"\x00", {"k": "v"}, "s",
    )  # fmt: skip
    assert list(back.supersedes) == ["r0"] and back.version == 3 and list(back.vector) == [1, 0]
    assert back.created_at.ToJsonString() == "2024-01-01T00:00:00Z"
    assert back.valid_from.ToJsonString() == "2024-01-02T00:00:00.500Z"
    assert back.valid_to.ToJsonString() == "2024-02-01T00:00:00Z"
    assert back.deleted_at.ToJsonString() == "2024-03-01T00:00:00Z"
    assert not back.HasField("if_version")  # input only
    # erstwhile's additions travel as fields their proto does not know, and are kept
    assert pb.Record.FromString(back.SerializeToString()).key == "k1"


def test_a_search_request_means_the_same(theirs: ModuleType) -> None:
    request = theirs.SearchRequest(
        namespace="notes", query_text="apple", top_k=7, filter={"topic": "food"},
        include_payload=True, include_vector=True, ids_only=True, mode=theirs.SM_HYBRID,
        rerank_candidate_k=70,
        predicates=[theirs.FieldPredicate(key="n", op=theirs.OP_GTE, values=["3"]),
                    theirs.FieldPredicate(key="c", op=theirs.OP_IN, values=["a", "b"])],
    )  # fmt: skip
    stamp(request.as_of, "2024-05-01T00:00:00Z")
    stamp(request.created_after, "2023-01-01T00:00:00Z")
    stamp(request.created_before, "2025-01-01T00:00:00Z")
    domain = convert.search_request(pb.SearchRequest.FromString(request.SerializeToString()))
    assert (domain.query, domain.top_k, domain.filter) == ("apple", 7, {"topic": "food"})
    assert domain.include_payload and domain.include_vector and domain.ids_only
    assert domain.ranking == Ranking.HYBRID and domain.candidate_k == 70
    assert [(p.key, p.op.value, p.values) for p in domain.predicates] == [
        ("n", "GTE", ["3"]), ("c", "IN", ["a", "b"]),
    ]  # fmt: skip
    assert domain.as_of == at("2024-05-01T00:00:00Z") and not domain.include_historical
    assert domain.created_after == at("2023-01-01T00:00:00Z")
    assert domain.created_before == at("2025-01-01T00:00:00Z")

    vector = theirs.SearchRequest(namespace="n", query_vector=[0.25, 0.5], include_invalidated=True)
    domain = convert.search_request(pb.SearchRequest.FromString(vector.SerializeToString()))
    assert domain.query is None and domain.query_vector == [0.25, 0.5]
    assert domain.include_historical and domain.top_k == 10  # top_k 0 = the default
    assert domain.ranking == Ranking.SEMANTIC  # unset mode is DENSE on their side and here

    modes = {theirs.SM_DENSE: Ranking.SEMANTIC, theirs.SM_SPARSE: Ranking.LEXICAL}
    for mode, ranking in modes.items():
        message = theirs.SearchRequest(namespace="n", query_text="q", mode=mode)
        parsed = convert.search_request(pb.SearchRequest.FromString(message.SerializeToString()))
        assert parsed.ranking == ranking
    ops = {"OP_EQ": "EQ", "OP_NEQ": "NEQ", "OP_GT": "GT", "OP_LT": "LT", "OP_LTE": "LTE"}
    for name, op in ops.items():
        message = theirs.SearchRequest(namespace="n", query_text="q", predicates=[
            theirs.FieldPredicate(key="k", op=getattr(theirs, name), values=["1"])])  # fmt: skip
        parsed = convert.search_request(pb.SearchRequest.FromString(message.SerializeToString()))
        assert parsed.predicates[0].op.value == op


def test_delete_and_expire_mean_the_same(theirs: ModuleType) -> None:
    delete = pb.DeleteRequest.FromString(
        theirs.DeleteRequest(namespace="n", id="x", hard=True).SerializeToString()
    )
    assert (delete.namespace, delete.id, delete.hard) == ("n", "x", True)
    actions = {theirs.EA_INVALIDATE: ExpireAction.INVALIDATE,
               theirs.EA_SOFT_DELETE: ExpireAction.SOFT_DELETE,
               theirs.EA_HARD_DELETE: ExpireAction.HARD_DELETE}  # fmt: skip
    for action, expected in actions.items():
        message = theirs.ExpireRequest(namespace="n", filter={"a": "b"}, action=action, max_rows=5)
        ours = pb.ExpireRequest.FromString(message.SerializeToString())
        domain = convert.expire_request(ours)
        assert (ours.namespace, domain.filter, domain.action, domain.max_rows) == (
            "n", {"a": "b"}, expected, 5,
        )  # fmt: skip
    # the one deliberate difference: their empty filter ("everything") is refused here
    everything = theirs.ExpireRequest(namespace="n", action=theirs.EA_INVALIDATE, max_rows=5)
    with pytest.raises(InvalidInput, match="pass all=true"):
        convert.expire_request(pb.ExpireRequest.FromString(everything.SerializeToString()))
    upserted = theirs.UpsertResponse.FromString(
        pb.UpsertResponse(ids=["a", "b"], versions=[1, 4], warnings=["w"]).SerializeToString()
    )
    assert list(upserted.ids) == ["a", "b"] and list(upserted.versions) == [1, 4]
    assert theirs.ExpireResponse.FromString(
        pb.ExpireResponse(affected=9).SerializeToString()
    ).affected == 9  # fmt: skip


def test_a_client_on_their_proto_only_changes_the_address(
    theirs: ModuleType, server: Any, tokens: Tokens, ns: str
) -> None:
    metadata = (("x-erstwhile-capability", f"Bearer {tokens.writer}"),)
    with grpc.insecure_channel(server.grpc_target) as channel:

        def call(method: str, request: Any, answer: Any) -> Any:
            rpc = channel.unary_unary(
                f"/erstwhile.semantic.v1.Semantic/{method}",
                request_serializer=type(request).SerializeToString,
                response_deserializer=answer.FromString,
            )
            return rpc(request, metadata=metadata, timeout=30)

        records = [
            theirs.Record(id="a", content="apple pie recipe", metadata={"topic": "food"}),
            theirs.Record(id="b", content="debug a Go panic", metadata={"topic": "code"}),
        ]
        written = call("Upsert", theirs.UpsertRequest(namespace=ns, records=records),
                       theirs.UpsertResponse)  # fmt: skip
        assert list(written.ids) == ["a", "b"] and list(written.versions) == [1, 1]
        found = call("Search", theirs.SearchRequest(namespace=ns, query_text="apple", top_k=2),
                     theirs.SearchResponse)  # fmt: skip
        assert [hit.record.id for hit in found.hits] == ["a", "b"]
        assert found.hits[0].record.version == 1 and found.hits[0].record.HasField("valid_from")
        assert -1 <= found.hits[1].score <= found.hits[0].score <= 1
        expired = call("Expire", theirs.ExpireRequest(namespace=ns, filter={"topic": "food"},
                                                      action=theirs.EA_SOFT_DELETE, max_rows=10),
                       theirs.ExpireResponse)  # fmt: skip
        assert expired.affected == 1
        call("Delete", theirs.DeleteRequest(namespace=ns, id="b"), theirs.DeleteResponse)
        audit = call("Search", theirs.SearchRequest(namespace=ns, query_text="apple",
                                                    include_invalidated=True),
                     theirs.SearchResponse)  # fmt: skip
        assert {hit.record.id: hit.record.HasField("deleted_at") for hit in audit.hits} == {
            "a": True, "b": True,
        }  # fmt: skip

"""REST and gRPC give the same answers: one scripted session, run once through each
wire on the same server (each in a namespace of its own), compared step by step —
ids, versions, validity, hits, scores, signals, vectors, counts, and every error's
code and message.

The script is written once, in the REST API's JSON; the gRPC side is derived from it
with the proto3 JSON mapping and the few names that differ on that wire
(query → query_text, ranking → mode, include_historical → include_invalidated,
candidate_k → rerank_candidate_k).
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import httpx
from google.protobuf import json_format
from tests.server.harness import Server

from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.domain.time import format_instant, now_us

from .conftest import Rpc, Tokens, error_code

T0 = "2023-01-01T00:00:00Z"
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    (
        "upsert",
        {
            "records": [
                {
                    "id": "a",
                    "content": "Alice works at Acme",
                    "key": "alice.employer",
                    "tags": ["work"],
                    "metadata": {"team": "core", "priority": "3"},
                    "valid_from": T0,
                },
                {
                    "id": "b",
                    "content": "Bob drives a red car",
                    "metadata": {"priority": "1"},
                    "valid_from": "2023-02-01T00:00:00Z",
                },
                {
                    "id": "c",
                    "content": "The recipe needs two eggs",
                    "payload": "AAEC",
                    "valid_from": "2023-03-01T00:00:00Z",
                    "source": "chat:1",
                },
                {
                    "id": "d",
                    "content": "Alice likes green tea",
                    "tags": ["home"],
                    "kind": "Fact",
                    "valid_from": "2023-04-01T12:30:00.123456Z",
                    "valid_to": "2030-01-01T00:00:00Z",
                },
            ]
        },
    ),
    ("search", {"query": "Alice", "ranking": "lexical"}),
    ("search", {"query": "Alice works", "ranking": "semantic", "include_vector": True}),
    ("search", {"query": "red car", "ranking": "hybrid", "top_k": 3, "candidate_k": 20}),
    (
        "search",
        {
            "query": "Alice",
            "ranking": "auto",
            "tags": ["work"],
            "filter": {"team": "core"},
            "predicates": [{"key": "priority", "op": "GTE", "values": ["3"]}],
        },
    ),
    ("search", {"query": "eggs", "ranking": "lexical", "include_payload": True, "kind": "note"}),
    (
        "upsert",
        {
            "records": [
                {
                    "id": "e",
                    "content": "Alice works at Globex",
                    "supersedes": ["a"],
                    "valid_from": "2024-06-01T00:00:00Z",
                }
            ]
        },
    ),
    ("search", {"query": "Alice works", "ranking": "lexical"}),
    ("search", {"query": "Alice works", "ranking": "lexical", "as_of": "2023-09-01T00:00:00Z"}),
    (
        "search",
        {
            "query": "Alice",
            "ranking": "hybrid",
            "between": {"from": T0, "until": "2024-01-01T00:00:00Z"},
        },
    ),
    (
        "search",
        {"query": "Alice", "ranking": "lexical", "ids_only": True, "include_historical": True},
    ),
    ("history", {"id": "a"}),
    (
        "upsert",
        {
            "records": [
                {
                    "id": "b",
                    "content": "stale",
                    "if_version": 5,
                    "valid_from": "2023-02-01T00:00:00Z",
                }
            ]
        },
    ),
    (
        "upsert",
        {
            "records": [
                {"id": "f", "content": "Alice again", "key": "alice.employer", "valid_from": T0}
            ]
        },
    ),
    (
        "upsert",
        {"records": [{"id": "g", "content": "x", "supersedes": ["missing"], "valid_from": T0}]},
    ),
    (
        "upsert",
        {
            "records": [
                {"id": "h", "content": "x", "valid_from": "2024-01-01T00:00:00Z", "valid_to": T0}
            ]
        },
    ),
    ("search", {"query": "Alice", "ranking": "lexical", "top_k": 51}),
    (
        "search",
        {
            "query": "Alice",
            "ranking": "lexical",
            "predicates": [{"key": "priority", "op": "GT", "values": ["high"]}],
        },
    ),
    ("search", {"query": "Alice", "ranking": "lexical", "as_of": T0, "include_historical": True}),
    ("expire", {"filter": {"priority": "1"}, "action": "invalidate", "max_rows": 10}),
    ("delete", {"id": "d"}),
    ("search", {"query": "Alice", "ranking": "lexical", "include_historical": True}),
    ("delete", {"id": "nope"}),
    ("history", {"id": "nope"}),
    ("expire", {"action": "hard_delete", "max_rows": 101, "filter": {"team": "core"}}),
    ("expire", {"action": "invalidate", "max_rows": 10}),
    ("expire", {"action": "soft_delete", "max_rows": 10, "tags": ["home"], "kind": "fact"}),
    ("search", {"query_vector": [1.0] + [0.0] * 255, "ranking": "semantic", "top_k": 2}),
]

RENAMES = {"query": "query_text", "include_historical": "include_invalidated",
           "candidate_k": "rerank_candidate_k"}  # fmt: skip
MODES = {"lexical": "SPARSE", "semantic": "DENSE", "hybrid": "HYBRID", "auto": "AUTO"}
RANKINGS = {f"SEARCH_MODE_{mode}": ranking for ranking, mode in MODES.items()}


def search_message(ns: str, body: dict[str, Any]) -> pb.SearchRequest:
    data: dict[str, Any] = {"namespace": ns}
    for key, value in body.items():
        if key == "ranking":
            data["mode"] = f"SEARCH_MODE_{MODES[value]}"
        elif key == "predicates":
            data[key] = [{**p, "op": f"PREDICATE_OP_{p['op']}"} for p in value]
        else:
            data[RENAMES.get(key, key)] = value
    return json_format.ParseDict(data, pb.SearchRequest())


# -- one normal form for both wires --------------------------------------------------


KEYS = ("id", "version", "content", "payload", "kind", "key", "tags", "metadata", "source",
        "valid_from", "valid_to", "deleted_at", "superseded_by", "supersedes",
        "vector")  # fmt: skip
STARTED = format_instant(now_us())


def rest_record(data: dict[str, Any]) -> dict[str, Any]:
    """The fields both wires carry; an instant the server took from its clock during
    this test (a delete, an expire) is "now", since the two runs happen moments apart."""
    found = {key: data[key] for key in KEYS if data.get(key) not in (None, [], {}, "")}
    for name in ("valid_to", "deleted_at"):
        if STARTED <= found.get(name, "") < "2030":
            found[name] = "now"
    return found


def grpc_record(message: pb.Record) -> dict[str, Any]:
    data: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    for name in ("valid_from", "valid_to", "deleted_at"):
        if message.HasField(name):
            data[name] = format_instant(getattr(message, name).ToMicroseconds())
    if "version" in data:
        data["version"] = int(data["version"])
    if message.vector:
        data["vector"] = list(message.vector)
    return rest_record(data)


def rest_outcome(http: httpx.Client, ns: str, step: str, body: dict[str, Any]) -> Any:
    base = f"/v1/namespaces/{ns}"
    if step == "upsert":
        response = http.post(f"{base}/records", json=body)
    elif step == "search":
        response = http.post(f"{base}/search", json=body)
    elif step == "expire":
        response = http.post(f"{base}/expire", json=body)
    elif step == "history":
        response = http.get(f"{base}/records/{body['id']}/history")
    else:
        response = http.delete(f"{base}/records/{body['id']}")
    if response.status_code >= 400:
        error = response.json()["error"]
        return ("error", error["code"], error["message"].replace(ns, "NS"))
    if step == "upsert":
        return response.json()
    if step == "search":
        result = response.json()
        hits = [
            (rest_record(h["record"]), h["score"], h.get("signals", {})) for h in result["hits"]
        ]
        return (result["ranking"], hits, result["unembedded"], result["warnings"])
    if step == "history":
        return [rest_record(r) for r in response.json()["versions"]]
    if step == "expire":
        return response.json()["affected"]
    return None


def signals(hit: pb.Hit) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if hit.signals.HasField("lexical"):
        lexical = hit.signals.lexical
        found["lexical"] = {"rank": lexical.rank, "score": lexical.score}
        if lexical.terms:
            found["lexical"]["terms"] = lexical.terms
    if hit.signals.HasField("semantic"):
        lane = hit.signals.semantic
        found["semantic"] = {"rank": lane.rank, "similarity": lane.similarity}
    return found


def grpc_outcome(rpc: Rpc, ns: str, step: str, body: dict[str, Any]) -> Any:
    try:
        if step == "upsert":
            records = [json_format.ParseDict(r, pb.Record()) for r in body["records"]]
            answer = rpc.Upsert(pb.UpsertRequest(namespace=ns, records=records))
            return {"ids": list(answer.ids), "versions": list(answer.versions),
                    "warnings": list(answer.warnings)}  # fmt: skip
        if step == "search":
            result = rpc.Search(search_message(ns, body))
            hits = [(grpc_record(h.record), h.score, signals(h)) for h in result.hits]
            ranking = RANKINGS[pb.SearchMode.Name(result.mode)]
            return (ranking, hits, result.unembedded, list(result.warnings))
        if step == "history":
            answer = rpc.History(pb.HistoryRequest(namespace=ns, id=body["id"]))
            return [grpc_record(r) for r in answer.versions]
        if step == "expire":
            data = {**body, "namespace": ns, "action": f"EXPIRE_ACTION_{body['action'].upper()}"}
            return rpc.Expire(json_format.ParseDict(data, pb.ExpireRequest())).affected
        rpc.Delete(pb.DeleteRequest(namespace=ns, id=body["id"]))
        return None
    except grpc.RpcError as error:
        return ("error", error_code(error), (error.details() or "").replace(ns, "NS"))


def test_same_script_same_answers(server: Server, tokens: Tokens, admin: Rpc) -> None:
    rest_ns, grpc_ns = ("cf-" + uuid.uuid4().hex[:10] for _ in range(2))
    transcript = []
    with server.http(tokens.admin) as http:
        for index, (step, body) in enumerate(SCRIPT):
            over_rest = rest_outcome(http, rest_ns, step, body)
            over_grpc = grpc_outcome(admin, grpc_ns, step, body)
            assert over_grpc == over_rest, f"step {index}: {step} {body}"
            transcript.append(over_rest)
    # the script reached what it is meant to compare: hits, and each kind of error
    searches = [o for (step, _), o in zip(SCRIPT, transcript, strict=True) if step == "search"]
    assert sum(1 for o in searches if o[0] != "error" and o[1]) >= 9
    codes = {o[1] for o in transcript if isinstance(o, tuple) and o[0] == "error"}
    assert codes >= {"erstwhile.write.version_conflict", "erstwhile.write.conflict",
                     "erstwhile.input.invalid", "erstwhile.policy.limit",
                     "erstwhile.not_found"}  # fmt: skip

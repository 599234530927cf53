"""The graph routes of the REST API over a real ``erstwhile serve`` process (this
server has extraction off: asserted facts and mentions only)."""

from __future__ import annotations

import httpx

from .conftest import Tokens
from .harness import Server
from .test_rest import error_of, upsert


def test_facts_and_mentions_round_trip(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "m1", "content": "the kickoff meeting", "kind": "meeting"})
    made = writer.post(
        f"/v1/namespaces/{ns}/records/m1/mentions",
        json={"entities": [{"name": "Ada", "kind": "Person"}, {"name": "Apollo"}]},
    )
    assert made.status_code == 200, made.text
    mentions = made.json()["mentions"]
    assert [(m["record"], m["spelling"]) for m in mentions] == [("m1", "Ada"), ("m1", "Apollo")]
    assert all("provenance" not in m for m in mentions)
    fact = writer.post(
        f"/v1/namespaces/{ns}/facts",
        json={
            "subject": "ada",
            "predicate": " Leads ",
            "object": "Apollo",
            "valid_from": "2024-01-01",
        },
    )
    assert fact.status_code == 201, fact.text
    edge = fact.json()
    assert edge["predicate"] == "leads" and edge["valid_from"] == "2024-01-01T00:00:00.000000Z"
    assert "valid_to" not in edge and "provenance" not in edge
    ada = mentions[0]["entity"]
    assert edge["subject"] == ada  # "ada" resolved to the entity "Ada"

    listed = writer.get(f"/v1/namespaces/{ns}/entities").json()["entities"]
    assert [(e["name"], e["kind"]) for e in listed] == [("Ada", "person"), ("Apollo", "other")]
    assert [
        e["name"]
        for e in writer.get(f"/v1/namespaces/{ns}/entities", params={"q": "POL"}).json()["entities"]
    ] == ["Apollo"]
    one = writer.get(f"/v1/namespaces/{ns}/entities/{ada}").json()
    assert one == {
        "id": ada,
        "name": "Ada",
        "kind": "person",
        "aliases": [],
        "possibly_same_as": [],
    }
    edges = writer.get(f"/v1/namespaces/{ns}/entities/{ada}/relationships").json()
    assert [e["id"] for e in edges["relationships"]] == [edge["id"]]
    before = writer.get(
        f"/v1/namespaces/{ns}/entities/{ada}/relationships", params={"as_of": "2023-06-01"}
    ).json()
    assert before["relationships"] == []
    every = writer.get(
        f"/v1/namespaces/{ns}/entities/{ada}/relationships", params={"include_expired": "true"}
    ).json()
    assert len(every["relationships"]) == 1
    by = writer.get(f"/v1/namespaces/{ns}/entities/{ada}/mentions").json()["mentions"]
    assert [m["record"] for m in by] == ["m1"]
    audit = writer.get(f"/v1/namespaces/{ns}/audit").json()
    assert audit["extractor"] == "none" and audit["extraction_backlog"] == 0


def test_graph_errors_and_capabilities(
    server: Server, tokens: Tokens, writer: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "r", "content": "x"})
    error_of(
        writer.post(
            f"/v1/namespaces/{ns}/records/nope/mentions", json={"entities": [{"name": "Ada"}]}
        ),
        404,
        "erstwhile.not_found",
    )
    assert "entities" in error_of(
        writer.post(f"/v1/namespaces/{ns}/records/r/mentions", json={"entities": []}),
        400,
        "erstwhile.input.invalid",
    )
    assert "predicate" in error_of(
        writer.post(f"/v1/namespaces/{ns}/facts", json={"subject": "a", "object": "b"}),
        400,
        "erstwhile.input.invalid",
    )
    error_of(
        writer.post(
            f"/v1/namespaces/{ns}/facts",
            json={"subject": "a", "predicate": "p", "object": "b", "extra": 1},
        ),
        400,
        "erstwhile.input.invalid",
    )
    error_of(writer.get(f"/v1/namespaces/{ns}/entities/ent_nope"), 404, "erstwhile.not_found")
    error_of(
        writer.get(f"/v1/namespaces/{ns}/entities/ent_nope/relationships"),
        404,
        "erstwhile.not_found",
    )
    with server.http(tokens.reader) as reader:
        assert reader.get(f"/v1/namespaces/{ns}/entities").status_code == 200
        error_of(
            reader.post(
                f"/v1/namespaces/{ns}/facts", json={"subject": "a", "predicate": "p", "object": "b"}
            ),
            403,
            "erstwhile.auth.forbidden",
        )
    with server.http() as anonymous:
        error_of(
            anonymous.get(f"/v1/namespaces/{ns}/entities"), 401, "erstwhile.auth.unauthenticated"
        )
    assert writer.get(f"/v1/namespaces/{ns}/entities").json() == {"entities": []}  # nothing written

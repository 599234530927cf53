"""A record appended by graph expansion says how it was reached in words a reader
knows: each ``via`` path carries the entity's name beside its id, on both backends
and in the gRPC answer."""

from __future__ import annotations

import erstwhile
from erstwhile.adapters.grpc import convert

NS = "via"


def test_via_names_the_entity(memory: erstwhile.Memory) -> None:
    memory.upsert(NS, [
        {"id": "seed", "content": "Ada works on Apollo"},
        {"id": "doc", "content": "We launched the rocket"},
        {"id": "ops", "content": "Kafka runbook"},
    ])  # fmt: skip
    memory.mention(NS, "seed", ["Ada Lovelace"])
    memory.mention(NS, "doc", ["Apollo"])
    memory.mention(NS, "ops", [{"name": "Kafka", "kind": "tool"}])
    memory.assert_fact(NS, "Ada Lovelace", "works_on", "Apollo")
    memory.assert_fact(NS, "Ada Lovelace", "uses", "Kafka")

    found = memory.search(NS, "works", ranking="lexical", expand=True)
    assert [hit.record.id for hit in found.hits] == ["seed", "doc", "ops"]
    names = {e.id: e.name for e in memory.entities(NS)}
    paths = {hit.record.id: hit.via for hit in found.hits[1:]}
    assert [(v["name"], v["predicate"]) for v in paths["doc"]] == [("Apollo", "works_on")]
    assert [(v["name"], v["predicate"]) for v in paths["ops"]] == [("Kafka", "uses")]
    for via in paths["doc"] + paths["ops"]:
        assert names[via["entity"]] == via["name"]  # the id still links to the entity

    answer = convert.search_response(found, include_vector=False)
    assert [(v.entity, v.name) for v in answer.hits[1].via] == [
        (paths["doc"][0]["entity"], "Apollo")
    ]

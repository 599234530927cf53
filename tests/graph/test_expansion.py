"""Graph expansion in search (SPEC §6), on both backends: related records are appended
after the direct hits, never reorder them, obey the search's scope and time on every
hop, and say how they were reached."""

from __future__ import annotations

import pytest

import erstwhile

NS = "exp"


def entity(m: erstwhile.Memory, name: str) -> str:
    (found,) = [e.id for e in m.entities(NS, name) if e.name == name]
    return found


def edge(m: erstwhile.Memory, subject: str, predicate: str) -> str:
    (found,) = [
        e.id for e in m.relationships(NS, entity(m, subject), include_expired=True)
        if e.predicate == predicate
    ]  # fmt: skip
    return found


def world(m: erstwhile.Memory) -> None:
    m.upsert(NS, [
        {"id": "seed", "content": "Ada works on Apollo", "tags": ["work"],
         "valid_from": "2024-01-01"},
        {"id": "k", "content": "Ada uses Kafka", "valid_from": "2024-01-01"},
        {"id": "kafka-doc", "content": "We picked Kafka", "tags": ["work"],
         "valid_from": "2023-01-01"},
        {"id": "apollo-doc", "content": "We launched Apollo", "tags": ["work"],
         "valid_from": "2023-01-01"},
        {"id": "apollo-other", "content": "We think Apollo is big", "tags": ["other"],
         "valid_from": "2023-01-01"},
    ])  # fmt: skip
    m.extract(NS)
    m.invalidate(NS, "k", at="2024-03-01")  # "Ada uses Kafka" held in Jan and Feb only
    m.extract(NS)


def search(m: erstwhile.Memory, **options: object) -> erstwhile.SearchResult:
    return m.search(NS, "works", ranking="lexical", tags=["work"], **options)


def test_appended_records_obey_scope_and_time(graph: erstwhile.Memory) -> None:
    world(graph)
    february = search(graph, as_of="2024-02-01", expand=True)
    plain = search(graph, as_of="2024-02-01")
    assert february.hits[: len(plain.hits)] == plain.hits  # direct hits unchanged
    assert [h.record.id for h in february.hits] == ["seed", "apollo-doc", "kafka-doc"]
    apollo, kafka = february.hits[1], february.hits[2]
    assert apollo.signals == {"graph": {"hops": 1, "from": "seed"}}
    assert apollo.via == [{"entity": entity(graph, "Apollo"), "name": "Apollo",
                           "predicate": "works_on",
                           "edge": edge(graph, "Ada", "works_on")}]  # fmt: skip
    assert kafka.via == [{"entity": entity(graph, "Kafka"), "name": "Kafka", "predicate": "uses",
                          "edge": edge(graph, "Ada", "uses")}]  # fmt: skip
    # "apollo-other" is outside the tag scope, "k" too; in April the Kafka edge is closed
    april = search(graph, as_of="2024-04-01", expand=True)
    assert [h.record.id for h in april.hits] == ["seed", "apollo-doc"]
    assert [h.record.id for h in search(graph, expand=True).hits] == ["seed", "apollo-doc"]
    # a window that overlaps the edge's validity walks it
    window = search(graph, between={"from": "2024-02-15", "until": "2024-06-01"}, expand=True)
    assert [h.record.id for h in window.hits] == ["seed", "apollo-doc", "kafka-doc"]
    # include_historical has no temporal clause on edges either
    historical = search(graph, include_historical=True, expand=True)
    assert [h.record.id for h in historical.hits] == ["seed", "apollo-doc", "kafka-doc"]
    unscoped = graph.search(NS, "works", ranking="lexical", as_of="2024-02-01", expand=True)
    assert [h.record.id for h in unscoped.hits] == ["seed", "apollo-doc", "apollo-other",
                                                    "k", "kafka-doc"]  # fmt: skip


def test_hops_and_limit(graph: erstwhile.Memory) -> None:
    graph.upsert(NS, [
        {"id": "p1", "content": "first page", "kind": "page"},
        {"id": "p2", "content": "second", "kind": "page"},
        {"id": "p3", "content": "third", "kind": "page"},
        {"id": "p4", "content": "fourth", "kind": "page"},
    ])  # fmt: skip
    for record, name in (("p1", "E1"), ("p2", "E2"), ("p3", "E3"), ("p4", "E2")):
        graph.mention(NS, record, [name])
    graph.assert_fact(NS, "E1", "leads to", "E2", valid_from="2020-01-01")
    graph.assert_fact(NS, "E2", "leads to", "E3", valid_from="2020-01-01")

    def ids(expand: object) -> list[tuple[str, object]]:
        result = graph.search(NS, "first", ranking="lexical", expand=expand)
        return [(h.record.id, h.signals.get("graph")) for h in result.hits]

    assert ids(True) == [("p1", None), ("p2", {"hops": 1, "from": "p1"}),
                         ("p4", {"hops": 1, "from": "p1"})]  # fmt: skip
    assert ids({"hops": 2}) == [
        ("p1", None), ("p2", {"hops": 1, "from": "p1"}), ("p4", {"hops": 1, "from": "p1"}),
        ("p3", {"hops": 2, "from": "p2"}),
    ]  # fmt: skip
    assert ids({"hops": 2, "limit": 1}) == [("p1", None), ("p2", {"hops": 1, "from": "p1"})]
    assert graph.search(NS, "first", ranking="lexical", expand=True, ids_only=True).ids() == [
        "p1", "p2", "p4",
    ]  # fmt: skip
    assert graph.search(NS, "nothing-matches", ranking="lexical", expand=True).hits == []


def test_the_expand_limit_is_capped_by_policy(store_target: str) -> None:
    caps = erstwhile.service.Policy(max_top_k=5)
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        policy=caps) as m:  # fmt: skip
        m.add(NS, "note")
        with pytest.raises(erstwhile.PolicyLimit) as error:
            m.search(NS, "note", top_k=5, expand={"limit": 6})
        assert "expand.limit" in error.value.message
        assert m.search(NS, "note", top_k=5, expand={"limit": 5}).ids()

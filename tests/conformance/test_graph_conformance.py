"""The knowledge graph through ``erstwhile.open`` and through ``erstwhile.Client`` (a
real ``erstwhile serve`` with the heuristic extractor): same calls, same answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.harness import Server, start_server, write_config

import erstwhile

Store = erstwhile.Memory | erstwhile.Client


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("graph-conformance")
    config = write_config(root / "erstwhile.toml", extra='\n[extraction]\nprovider = "heuristic"\n')
    server = start_server(root / "server.db", config)
    yield server, server.token(admin=True, name="graph")[1]
    server.stop()


@pytest.fixture(params=["embedded", "client"])
def m(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store: Store
    if request.param == "embedded":
        store = erstwhile.open(tmp_path / "embedded.db", embedder="hash", extractor="heuristic",
                               background_jobs=False)  # fmt: skip
    else:
        server, secret = request.getfixturevalue("served")
        store = erstwhile.Client(server.url, token=secret)
    with store:
        yield store


@pytest.fixture
def ns() -> str:
    return "g-" + uuid.uuid4().hex[:12]


def test_extract_read_and_expand(m: Store, ns: str) -> None:
    m.upsert(ns, [
        {"id": "a", "content": "Ada works on Apollo", "valid_from": "2024-01-01"},
        {"id": "b", "content": "Apollo depends on Redis", "valid_from": "2024-01-01"},
    ])  # fmt: skip
    report = m.extract(ns)
    assert report.remaining == 0 and report.extractor_id == "heuristic"
    names = {e.name: e for e in m.entities(ns)}
    assert set(names) == {"Ada", "Apollo", "Redis"}
    assert names["Apollo"].kind == "project"
    assert [e.name for e in m.entities(ns, "red", kind="tool")] == ["Redis"]
    apollo = names["Apollo"].id
    assert m.entity(ns, apollo)["possibly_same_as"] == []
    edges = m.relationships(ns, apollo)
    assert {e.predicate for e in edges} == {"works_on", "depends_on"}
    assert all(e.provenance and e.provenance["extractor"] == "heuristic" for e in edges)
    assert {x.record for x in m.mentions(ns, apollo)} == {"a", "b"}
    hits = m.search(ns, "Ada", ranking="lexical", expand=True).hits
    assert [h.record.id for h in hits] == ["a", "b"]
    assert hits[1].signals == {"graph": {"hops": 1, "from": "a"}}
    m.supersede(ns, "b", {"id": "b2", "content": "Apollo depends on Kafka",
                          "valid_from": "2024-06-01"})  # fmt: skip
    m.extract(ns)
    assert {m.entity(ns, e.object)["name"] for e in m.relationships(ns, apollo)
            if e.predicate == "depends_on"} == {"Kafka"}  # fmt: skip
    then = m.relationships(ns, apollo, as_of="2024-03-01")
    assert {m.entity(ns, e.object)["name"] for e in then if e.predicate == "depends_on"} == {
        "Redis"
    }
    assert len(m.relationships(ns, apollo, include_expired=True)) == 3


def test_asserted_facts_and_mentions(m: Store, ns: str) -> None:
    m.upsert(ns, [{"id": "d", "content": "decided to ship", "kind": "decision"}])
    made = m.mention(ns, "d", ["Ada", {"name": "Launch", "kind": "Milestone"}])
    assert [(x.record, x.spelling, x.provenance) for x in made] == [
        ("d", "Ada", None), ("d", "Launch", None),
    ]  # fmt: skip
    edge = m.assert_fact(ns, "ada", "Owns", "Launch", valid_from="2024-02-01")
    assert (edge.predicate, edge.provenance, edge.valid_to) == ("owns", None, None)
    assert edge.subject == made[0].entity
    assert m.relationships(ns, edge.subject) == [edge]
    with pytest.raises(erstwhile.NotFound):
        m.mention(ns, "missing", ["Ada"])
    with pytest.raises(erstwhile.InvalidInput):
        m.assert_fact(ns, "Ada", " ", "Launch")

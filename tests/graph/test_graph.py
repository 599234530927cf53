"""The knowledge graph through the Python API, on both backends: the extract job,
asserted facts and mentions, the sweep, hard deletes and expansion."""

from __future__ import annotations

from typing import Any

import pytest

import erstwhile
from erstwhile.domain.time import parse_instant

NS = "team"


def by_name(m: erstwhile.Memory, name: str) -> str:
    (found,) = [e for e in m.entities(NS) if e.name == name]
    return found.id


def facts(m: erstwhile.Memory, **options: Any) -> set[tuple[str, str, str]]:
    names = {e.id: e.name for e in m.entities(NS)}
    edges = m.service.store.graph.relationships(NS, None, None) if options.get("every") else [
        edge for entity in names for edge in m.relationships(NS, entity)
    ]  # fmt: skip
    return {(names[e.subject], e.predicate, names[e.object]) for e in edges}


def snapshot(m: erstwhile.Memory) -> list[dict[str, Any]]:
    """Every stored field of every version of every record."""
    out = []
    for hit in m.search(NS, "a", include_historical=True, ranking="lexical", top_k=1000).hits:
        for version in m.service.store.versions(NS, hit.record.id):
            out.append(m.get(NS, hit.record.id, version).model_dump(mode="json"))
    return sorted(out, key=lambda r: (r["id"], r["version"]))


def test_extraction_reads_notes_and_changes_no_record(graph: erstwhile.Memory) -> None:
    graph.upsert(NS, [
        {"id": "n1", "content": "Ada works on Apollo. Apollo depends on Redis a lot."},
        {"id": "n2", "content": "Bob works on Apollo", "kind": "fact"},  # not a note: skipped
        {"id": "n3", "content": "Grace uses Redis", "origin": {"source": "docs",
                                                                "document": "a.md", "chunk": 0,
                                                                "revision": "r1"},
         "kind": "document"},
    ])  # fmt: skip
    before = [graph.get(NS, i).model_dump(mode="json") for i in ("n1", "n2", "n3")]
    assert graph.service.audit(NS)["extraction_backlog"] == 2
    report = graph.extract(NS)
    assert (report.extracted, report.remaining, report.extractor_id) == (2, 0, "heuristic")
    assert [graph.get(NS, i).model_dump(mode="json") for i in ("n1", "n2", "n3")] == before
    assert facts(graph) == {
        ("Ada", "works_on", "Apollo"), ("Apollo", "depends_on", "Redis"),
        ("Grace", "uses", "Redis"),
    }  # fmt: skip
    assert "Bob" not in {e.name for e in graph.entities(NS)}
    (edge,) = [e for e in graph.relationships(NS, by_name(graph, "Grace"))]
    assert edge.provenance == {
        "record": "n3", "job": report.job_id, "extractor": "heuristic",
        "origin": {"source": "docs", "document": "a.md", "chunk": 0, "revision": "r1"},
    }  # fmt: skip
    assert edge.valid_from == parse_instant(graph.get(NS, "n3").valid_from, "t")
    # a re-run reads nothing and writes nothing
    again = graph.extract(NS)
    assert (again.extracted, again.closed) == (0, 0)
    assert len(graph.service.store.graph.relationships(NS, None, None)) == 3


def test_mentions_keep_the_records_spelling_and_entities_converge(
    graph: erstwhile.Memory,
) -> None:
    graph.upsert(NS, [
        {"id": "a", "content": "Ada Lovelace works on Erstwhile"},
        {"id": "b", "content": "ADA LOVELACE joined Acme"},
        {"id": "c", "content": "@ada-lovelace uses Erstwhile"},
        {"id": "d", "content": "Ada-Lovelace uses Redis"},
    ])  # fmt: skip
    graph.extract(NS)
    ada = by_name(graph, "Ada Lovelace")
    spellings = {(m.record, m.spelling) for m in graph.mentions(NS, ada)}
    assert spellings == {
        ("a", "Ada Lovelace"), ("b", "ADA LOVELACE"), ("c", "@ada-lovelace"),
        ("d", "Ada-Lovelace"),
    }  # fmt: skip
    assert graph.entity(NS, ada)["kind"] == "person"


def test_asserted_facts_keep_free_labels_and_are_never_swept(graph: erstwhile.Memory) -> None:
    first = graph.add(NS, "Ada works on Apollo", valid_from="2024-01-01")
    graph.extract(NS)
    asserted = graph.assert_fact(NS, "Ada", "  Mentors ", {"name": "Grace", "kind": "Mentor"},
                                 valid_from="2024-02-01")  # fmt: skip
    assert asserted.predicate == "mentors" and asserted.provenance is None
    assert graph.entity(NS, asserted.object)["kind"] == "mentor"
    again = graph.assert_fact(NS, "ada", "mentors", "Grace", valid_from="2024-02-01")
    assert again.id == asserted.id  # the same fact from the same instant, once
    graph.supersede(NS, first, {"content": "Ada works on Zephyr", "valid_from": "2024-06-01"})
    report = graph.extract(NS)
    assert report.closed == 1 and report.extracted == 1
    ada = by_name(graph, "Ada")
    now = {(e.predicate, graph.entity(NS, e.object)["name"]) for e in graph.relationships(NS, ada)}
    assert now == {("mentors", "Grace"), ("works_on", "Zephyr")}
    then = graph.relationships(NS, ada, as_of="2024-03-01")
    assert {(e.predicate, graph.entity(NS, e.object)["name"]) for e in then} == {
        ("mentors", "Grace"), ("works_on", "Apollo"),
    }  # fmt: skip
    every = graph.relationships(NS, ada, include_expired=True)
    (closed,) = [e for e in every if e.valid_to is not None]
    assert closed.valid_to == parse_instant("2024-06-01", "t")  # when the record stopped
    with pytest.raises(erstwhile.InvalidInput):
        graph.relationships(NS, ada, include_expired=True, as_of="2024-01-01")


def test_invalidation_closes_facts_at_the_invalidation(graph: erstwhile.Memory) -> None:
    note = graph.add(NS, "Ada uses Redis", valid_from="2024-01-01")
    graph.extract(NS)
    graph.invalidate(NS, note, at="2024-05-01")
    assert graph.extract(NS).closed == 1
    (edge,) = graph.relationships(NS, by_name(graph, "Ada"), include_expired=True)
    assert edge.valid_to == parse_instant("2024-05-01", "t")
    assert graph.relationships(NS, by_name(graph, "Ada")) == []


def test_a_rewritten_record_is_read_again_and_its_old_facts_retracted(
    graph: erstwhile.Memory,
) -> None:
    graph.add(NS, "Ada uses Redis", id="r")
    graph.extract(NS)
    graph.upsert(NS, {"id": "r", "content": "Ada uses Kafka"})
    assert graph.service.audit(NS)["extraction_backlog"] == 1
    graph.extract(NS)
    assert facts(graph) == {("Ada", "uses", "Kafka")}
    old = [e for e in graph.service.store.graph.relationships(NS, None, None)
           if e.valid_to is not None]  # fmt: skip
    assert len(old) == 1 and old[0].valid_to == old[0].valid_from  # valid at no instant
    assert {m.spelling for m in graph.service.store.graph.mentions(NS)} == {"Ada", "Kafka"}


def test_asserted_mentions_and_errors(graph: erstwhile.Memory) -> None:
    rid = graph.add(NS, "a meeting about the launch", kind="decision")
    made = graph.mention(NS, rid, ["Ada", {"name": "Launch Plan", "kind": " Project ",
                                           "aliases": ["LP"]}])  # fmt: skip
    assert [m.spelling for m in made] == ["Ada", "Launch Plan"]
    assert all(m.provenance is None for m in made)
    plan = graph.entity(NS, made[1].entity)
    assert (plan["kind"], plan["aliases"]) == ("project", ["LP"])
    assert [e.name for e in graph.entities(NS, "lp")] == ["Launch Plan"]  # by alias
    assert [e.name for e in graph.entities(NS, kind="project")] == ["Launch Plan"]
    with pytest.raises(erstwhile.NotFound):
        graph.mention(NS, "missing", ["Ada"])
    with pytest.raises(erstwhile.NotFound):
        graph.entity(NS, "ent_missing")
    with pytest.raises(erstwhile.InvalidInput) as error:
        graph.mention(NS, rid, [{"name": " "}])
    assert "entities[0].name" in error.value.message
    with pytest.raises(erstwhile.InvalidInput) as error:
        graph.assert_fact(NS, "Ada", "", "Bob")
    assert "predicate" in error.value.message
    with pytest.raises(erstwhile.InvalidInput):
        graph.assert_fact(NS, "Ada", "likes", "Ada")
    assert len(graph.entities(NS)) == 2  # the refused calls wrote nothing


def test_hard_delete_removes_mentions_and_the_edges_it_alone_evidences(
    graph: erstwhile.Memory,
) -> None:
    graph.upsert(NS, [
        {"id": "one", "content": "Ada works on Apollo"},
        {"id": "two", "content": "Ada works on Apollo. Bob uses Redis"},
    ])  # fmt: skip
    graph.extract(NS)
    asserted = graph.assert_fact(NS, "Bob", "knows", "Ada")
    graph.delete(NS, "two", hard=True)
    edges = graph.service.store.graph.relationships(NS, None, None)
    assert {e.provenance["record"] if e.provenance else None for e in edges} == {"one", None}
    assert {m.record for m in graph.service.store.graph.mentions(NS)} == {"one"}
    # Redis was only in the deleted record; Bob stays, an asserted fact still names him
    assert {e.name for e in graph.entities(NS)} == {"Ada", "Apollo", "Bob"}
    assert asserted.id in {e.id for e in edges}
    graph.delete(NS, "one")  # soft: the graph keeps it (the record can come back)
    assert len(graph.service.store.graph.mentions(NS)) == 2


def test_extraction_is_off_by_default(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.add(NS, "Ada works on Apollo")
        with pytest.raises(erstwhile.InvalidInput) as error:
            m.extract(NS)
        assert "extraction" in error.value.message
        assert m.service.audit(NS)["extractor"] == "none"
        assert m.entities(NS) == []


def test_writes_queue_the_extract_job_in_the_background(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none", extractor="heuristic") as m:
        assert m.service.background is not None
        note = m.add(NS, "Ada uses Redis", valid_from="2024-01-01")
        assert m.service.background.idle()
        assert {e.name for e in m.entities(NS)} == {"Ada", "Redis"}
        m.supersede(NS, note, {"content": "Ada uses Kafka", "valid_from": "2024-05-01"})
        assert m.service.background.idle()
        ada = by_name(m, "Ada")
        assert {m.entity(NS, e.object)["name"] for e in m.relationships(NS, ada)} == {"Kafka"}
        jobs = len(m.service.jobs(NS))
        m.add(NS, "nothing to read here", kind="fact")  # not a note: no work, no job row
        assert m.service.background.idle()
        assert len(m.service.jobs(NS)) == jobs


def test_mined_records_are_extracted_and_a_changed_chunk_closes_its_facts(
    graph: erstwhile.Memory, tmp_path: Any
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "team.md").write_text("Ada works on Apollo.\n")
    graph.mine(NS, folder)
    graph.extract(NS)
    (edge,) = graph.relationships(NS, by_name(graph, "Ada"))
    assert edge.provenance is not None and edge.provenance["origin"]["document"] == "team.md"
    (folder / "team.md").write_text("Ada works on Zephyr.\n")
    graph.mine(NS, folder)  # supersedes the chunk
    assert graph.extract(NS).closed == 1
    now = {
        graph.entity(NS, e.object)["name"] for e in graph.relationships(NS, by_name(graph, "Ada"))
    }
    assert now == {"Zephyr"}

"""An export carries everything a person or agent told the store (issue #42): the
namespace settings, asserted facts and mentions, aliases, entity identities and
``possibly_same_as`` links, and the derived graph with its record times, so a
restored store answers ``known_at`` expansions as the original did. Both backends."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support import pg

import erstwhile
from erstwhile import backups
from erstwhile.domain.errors import InvalidInput, WriteConflict
from erstwhile.domain.time import format_instant, now_us
from erstwhile.store.sql import maintenance

NS = "agent"
PLAIN = "plain"  # a namespace indexed in the 'simple' text-search language


def open_store(target: str | Path, **options: Any) -> erstwhile.Memory:
    options = {"embedder": "hash", "extractor": "heuristic", "background_jobs": False,
               **options}  # fmt: skip
    return erstwhile.open(target, **options)


def populate(m: erstwhile.Memory) -> list[int]:
    """Extracted facts, a rewrite that retracts some, a supersession whose sweep closes
    others, asserted facts with aliases and kinds, a manual mention, ambiguous names
    linked by possibly_same_as, and a namespace in another language. Returns an
    instant after each step (for known_at)."""
    instants = []

    def step(write: Callable[[], object]) -> None:
        write()
        instants.append(now_us())

    step(lambda: m.add(NS, "Ada Lovelace uses the Analytical Engine.", id="n1", tags=["t"]))
    step(lambda: m.add(NS, "Charles Babbage uses the Analytical Engine.", id="n2"))
    step(lambda: m.add(NS, "Grace Hopper uses COBOL.", id="n3"))
    step(lambda: m.add(NS, "Charles Babbage uses Python.", id="n5"))
    step(lambda: m.extract(NS))
    step(lambda: m.upsert(NS, [{"id": "n1", "content": "Ada Lovelace uses Python."}]))
    step(lambda: m.supersede(NS, "n3", {"id": "n4", "content": "Grace Hopper uses Fortran."}))
    step(lambda: m.extract(NS))
    step(lambda: m.assert_fact(
        NS, {"name": "Ada Lovelace", "aliases": ["Countess of Lovelace"]}, "admires",
        {"name": "Grace Hopper", "kind": "person"}, valid_from="2020-01-01",
    ))  # fmt: skip
    step(lambda: m.mention(NS, "n2", [{"name": "Grace Hopper", "kind": "person"}]))
    step(lambda: m.assert_fact(NS, {"name": "Anderson", "kind": "person"}, "knows", "Ada"))
    step(lambda: m.assert_fact(NS, {"name": "Anderson", "kind": "place"}, "near", "COBOL"))
    step(lambda: m.assert_fact(NS, "Andersen", "knows", "Fortran"))
    step(lambda: m.add(PLAIN, "the quick brown foxes", id="p1"))
    return instants


def export_text(m: erstwhile.Memory, graph: str = "whole") -> str:
    return "".join(line + "\n" for line in backups.export_lines(m, graph=graph))


def graph_state(m: erstwhile.Memory) -> dict[str, Any]:
    """What a reader sees of the graph: every entity with its links, edge and mention."""
    return {
        "entities": [m.service.entity(NS, e.id) for e in m.entities(NS, limit=1000)],
        "edges": [e.to_json() for e in m.service.store.graph.relationships(NS, None, None)],
        "mentions": [x.to_json() for x in m.service.store.graph.mentions(NS)],
    }


def expansions(m: erstwhile.Memory, instants: list[int]) -> list[list[tuple[str, Any]]]:
    """A one-hop expansion put back to each instant, and now."""
    out = []
    for known_at in [*instants, None]:
        options: dict[str, Any] = {"ranking": "lexical", "top_k": 3,
                                   "expand": {"hops": 2, "limit": 50}}  # fmt: skip
        if known_at is not None:
            options["known_at"] = format_instant(known_at)
        for query in ("Ada", "Grace", "Babbage"):
            hits = m.search(NS, query, **options).hits
            out.append([(h.record.id, h.via) for h in hits])
    return out


def test_a_round_trip_carries_the_told_graph_settings_and_record_times(
    backend: str, store_target: str, tmp_path: Path
) -> None:
    with open_store(store_target, text_search={PLAIN: "simple"}) as m:
        instants = populate(m)
        text = export_text(m)
        before, past = graph_state(m), expansions(m, instants)
        assert any(h for h in past[0]) and past[0] != past[-3]  # the past differs from now
        assert m.search(PLAIN, "fox", ranking="lexical").hits == []  # 'simple': no stems
    target, cleanup = pg.fresh_target(backend)
    try:
        with open_store(target) as m:  # no text_search given: the export's travels
            path = tmp_path / "e.jsonl"
            path.write_text(text, encoding="utf-8")
            report = backups.import_export(m, path)
            assert report.warnings == []
            assert (report.entities, report.namespaces) == (len(before["entities"]), [NS, PLAIN])
            assert export_text(m) == text
            assert graph_state(m) == before
            assert expansions(m, instants) == past
            with m.service.store.reader() as read:
                assert maintenance.text_search(read, PLAIN) == "simple"
            assert m.search(PLAIN, "fox", ranking="lexical").hits == []
            assert m.search(PLAIN, "foxes", ranking="lexical").hits[0].record.id == "p1"
            assert m.service.extraction_backlog(NS) == 0  # the markers came too
            # the alias still resolves: a new fact about it lands on the same entity
            ada = m.entities(NS, "Ada Lovelace")[0]
            assert ada.aliases == ("Countess of Lovelace",)
            fact = m.assert_fact(NS, "Countess of Lovelace", "likes", "Tea")
            assert fact.subject == ada.id
            andersen = m.entities(NS, "Andersen")[0]
            assert len(m.service.entity(NS, andersen.id)["possibly_same_as"]) == 2
            assert backups.check(m).ok
    finally:
        cleanup()


def test_sqlite_to_postgres_to_export_is_byte_identical_graph_included(
    tmp_path: Path, postgres_server: pg.PgServer
) -> None:
    path, again = tmp_path / "memory.jsonl", tmp_path / "again.jsonl"
    with open_store(tmp_path / "a.db", text_search={PLAIN: "simple"}) as m:
        populate(m)
        path.write_text(export_text(m), encoding="utf-8")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert {k for line in lines for k in line} >= {"settings", "entity", "same_as", "mention",
                                                   "edge", "extracted"}  # fmt: skip
    assert any("known_to" in line.get("edge", {}) for line in lines)  # a past edge version
    assert any("known_to" in line.get("mention", {}) for line in lines)  # a retracted one
    target = postgres_server.new_target()
    try:
        with open_store(target) as m:
            backups.import_export(m, path)
            again.write_text(export_text(m), encoding="utf-8")
        assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
        with open_store(tmp_path / "b.db") as m:
            backups.import_export(m, again)
            assert export_text(m) == path.read_text(encoding="utf-8")
    finally:
        postgres_server.drop_target(target)


def test_a_told_export_leaves_the_derived_graph_to_extraction(
    store_target: str, tmp_path: Path
) -> None:
    with open_store(store_target) as m:
        populate(m)
        told = export_text(m, graph="told")
        graph = m.service.store.graph
        open_edges = {e.id for e in graph.relationships(NS, None, None) if e.valid_to is None}
    lines = [json.loads(line) for line in told.splitlines()]
    assert lines[0] == backups.header("told")
    assert not any("extracted" in line for line in lines)
    edges = [line["edge"] for line in lines if "edge" in line]
    mentions = [line["mention"] for line in lines if "mention" in line]
    assert len(edges) == 4 and not any("provenance" in e for e in edges)  # the asserted
    assert [(x["record"], x["spelling"]) for x in mentions] == [("n2", "Grace Hopper")]
    path = tmp_path / "told.jsonl"
    path.write_text(told, encoding="utf-8")
    with open_store(tmp_path / "restored.db") as m:
        report = backups.import_export(m, path)
        assert any("erstwhile extract" in w for w in report.warnings)
        assert export_text(m, graph="told") == told
        assert m.service.extraction_backlog(NS) == 4  # n1, n2, n4, n5: current notes
        m.extract(NS)
        graph = m.service.store.graph
        assert {e.id for e in graph.relationships(NS, None, None) if e.valid_to is None} == (
            open_edges
        )


def test_an_export_of_the_first_format_still_imports(store_target: str, tmp_path: Path) -> None:
    record = {"content": "kept", "created_at": "2024-01-01T00:00:00.000000Z", "id": "a",
              "kind": "note", "metadata": {}, "namespace": NS, "tags": [],
              "trust": "unverified", "updated_at": "2024-01-01T00:00:00.000000Z",
              "valid_from": "2024-01-01T00:00:00.000000Z", "version": 1}  # fmt: skip
    path = tmp_path / "v1.jsonl"
    path.write_text(
        '{"format":1,"erstwhile":"export"}\n' + json.dumps(record) + "\n"
        '{"hard_deleted":"b","namespace":"agent"}\n',
        encoding="utf-8",
    )
    assert backups.is_export(path)
    with open_store(store_target) as m:
        report = backups.import_export(m, path)
        assert (report.records, report.namespaces, report.entities) == (1, [NS], 0)
        assert m.get(NS, "a").content == "kept"
        lines = export_text(m).splitlines()
        assert json.loads(lines[0]) == backups.HEADER
        assert json.loads(lines[1])["settings"]["text_search"] == "english"
        assert json.loads(lines[2]) == record


def _edit(kind: str, change: Callable[[dict[str, Any]], object]) -> Callable[[list[str]], None]:
    """Changes the first line holding ``kind`` in place."""

    def edit(lines: list[str]) -> None:
        number = next(i for i, line in enumerate(lines) if kind in json.loads(line))
        data = json.loads(lines[number])
        change(data)
        lines[number] = json.dumps(data)

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_edit("mention", lambda d: d["mention"].update(record="nobody")),
         r"line \d+: mention.record 'nobody' is no record"),
        (_edit("edge", lambda d: d["edge"].update(object="ent_unknown")),
         r"line \d+: edge.object 'ent_unknown' is no entity line"),
        (_edit("edge", lambda d: d["edge"].update(known_from="yesterday")),
         r"line \d+: edge.known_from"),
        (_edit("entity", lambda d: d["entity"].update(colour="red")),
         r"line \d+: entity.colour is not a known field"),
        (_edit("same_as", lambda d: d.update(same_as=["a"])),
         r"line \d+: same_as must be a pair"),
        (_edit("settings", lambda d: d["settings"].update(text_search="klingon")),
         r"line \d+: .*text_search"),
        (_edit("extracted", lambda d: d.update(extra=1)),
         r"line \d+: a settings or graph line holds"),
        (lambda lines: lines.insert(5, lines[-1]), r"line 6: extracted.record .* is no record"),
        (_edit("erstwhile", lambda d: d.update(format=3)), "format 3; this erstwhile reads"),
        (_edit("erstwhile", lambda d: d.update(graph="half")), "graph must be one of"),
    ],
)  # fmt: skip
def test_a_bad_graph_or_settings_line_is_refused_and_nothing_written(
    tmp_path: Path, edit: Callable[[list[str]], None], message: str
) -> None:
    with open_store(tmp_path / "a.db") as m:
        populate(m)
        lines = export_text(m).splitlines()
    edit(lines)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_store(tmp_path / "b.db") as m:
        empty = export_text(m)
        with pytest.raises(InvalidInput, match=message):
            backups.import_export(m, path)
        assert export_text(m) == empty


def test_an_entity_the_store_holds_is_refused_and_nothing_written(
    store_target: str, tmp_path: Path
) -> None:
    path = tmp_path / "memory.jsonl"
    with open_store(tmp_path / "a.db") as m:
        populate(m)
        path.write_text(export_text(m), encoding="utf-8")
    with open_store(store_target) as m:
        m.assert_fact(NS, "Ada Lovelace", "likes", "Tea")  # the same entity id
        before = export_text(m)
        with pytest.raises(WriteConflict, match="entities and edges"):
            backups.import_export(m, path)
        assert export_text(m) == before


def test_an_embedder_bound_otherwise_is_a_warning_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    with open_store(tmp_path / "a.db") as m:
        m.add(NS, "one")
        embedder = m.service.embedder_for(NS)
        assert embedder is not None
        path.write_text(export_text(m), encoding="utf-8")
    settings = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
    assert settings == {"namespace": NS, "settings": {
        "embedder": {"dimensions": embedder.dimensions, "id": embedder.embedder_id},
        "text_search": "english"}}  # fmt: skip
    with open_store(tmp_path / "b.db", embedder="none") as m:
        report = backups.import_export(m, path)
    assert len(report.warnings) == 1
    assert embedder.embedder_id in report.warnings[0]
    assert "[namespaces.agent.embedding]" in report.warnings[0]

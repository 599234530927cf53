"""The graph commands: extract (with --extractor), entities, entities show, search
--expand."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Cli


@pytest.fixture
def notes(cli: Cli) -> dict[str, str]:
    return {
        "ada": cli.add("Ada works on Apollo", "--id", "ada"),
        "apollo": cli.add("Apollo depends on Redis", "--id", "apollo"),
        "other": cli.add("Lunch was good", "--id", "other"),
    }


def test_extract_then_read_the_graph(cli: Cli, notes: dict[str, str]) -> None:
    refused = cli.fails(2, "extract")  # extraction is off unless chosen
    assert "error: erstwhile.input.invalid:" in refused.stderr and "extract" in refused.stderr
    report = cli.json("--extractor", "heuristic", "extract")
    assert (report["extracted"], report["remaining"], report["extractor_id"]) == (
        3, 0, "heuristic",
    )  # fmt: skip
    human = cli.ok("--extractor", "heuristic", "extract").stdout
    assert "extracted 0 records with heuristic" in human
    listed = cli.json("entities")["entities"]
    assert [e["name"] for e in listed] == ["Ada", "Apollo", "Redis"]
    assert [e["name"] for e in cli.json("entities", "APO")["entities"]] == ["Apollo"]
    assert [e["name"] for e in cli.json("entities", "--kind", "tool")["entities"]] == ["Redis"]
    apollo = next(e["id"] for e in listed if e["name"] == "Apollo")
    shown = cli.json("entities", "show", apollo)
    assert shown["kind"] == "project"
    assert {r["predicate"] for r in shown["relationships"]} == {"works_on", "depends_on"}
    assert {m["record"] for m in shown["mentions"]} == {"ada", "apollo"}
    table = cli.ok("entities", "show", apollo).stdout
    assert "works_on" in table and "Redis" in table and "mentioned by" in table
    assert "Apollo" in cli.ok("entities").stdout
    cli.fails(1, "entities", "show", "ent_nope")
    cli.fails(2, "entities", "show")


def test_search_expand_appends_related_records(cli: Cli, notes: dict[str, str]) -> None:
    cli.ok("--extractor", "heuristic", "extract")
    assert cli.search_ids("Ada", "--ranking", "lexical") == ["ada"]
    expanded = cli.json("search", "Ada", "--ranking", "lexical", "--expand")["hits"]
    assert [h["record"]["id"] for h in expanded] == ["ada", "apollo"]
    assert expanded[1]["signals"] == {"graph": {"hops": 1, "from": "ada"}}
    assert expanded[1]["via"][0]["predicate"] in {"works_on", "depends_on"}
    assert "G" in cli.ok("search", "Ada", "--ranking", "lexical", "--expand").stdout

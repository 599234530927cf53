"""``--embedder``, ``embed``, ``reindex`` and the semantic lanes of ``search``, with the
hash embedder (fast, deterministic, no model to load)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import pytest
import typer

import erstwhile
from erstwhile.cli import context
from erstwhile.cli.context import CliState, open_memory

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]
HASH = ("--embedder", "hash")
NONE = ("--embedder", "none")
REPORT_KEYS = ["job_id", "namespace", "embedder_id", "embedded", "remaining"]
CONTENTS = ["Alice works at Acme", "Bob drinks tea every morning", "Carol rides a red bike"]


def add_all(cli: Cli, *global_options: str, namespace: str = "default") -> list[str]:
    return [
        cli.json(*global_options, "add", content, "-n", namespace)["ids"][0] for content in CONTENTS
    ]


def test_records_are_embedded_as_they_are_written(cli: Cli) -> None:
    add_all(cli, *HASH)
    report = cli.json(*HASH, "embed")
    assert list(report) == REPORT_KEYS
    assert report["namespace"] == "default"
    assert report["embedder_id"].startswith("hash:")
    assert (report["embedded"], report["remaining"]) == (0, 0)


def test_embed_fills_the_backlog_of_records_written_without_an_embedder(cli: Cli) -> None:
    add_all(cli, *HASH)
    add_all(cli, *NONE, namespace="later")
    data = cli.json(*HASH, "search", "tea", "-n", "later", "--ranking", "semantic")
    assert data["hits"] == [] and data["unembedded"] == len(CONTENTS)

    report = cli.json(*HASH, "embed", "-n", "later")
    assert report["namespace"] == "later"
    assert (report["embedded"], report["remaining"]) == (len(CONTENTS), 0)
    assert cli.json(*HASH, "embed", "-n", "later")["embedded"] == 0  # nothing twice

    after = cli.json(*HASH, "search", "tea", "-n", "later", "--ranking", "semantic")
    assert after["unembedded"] == 0 and len(after["hits"]) == len(CONTENTS)


def test_reindex_re_embeds_everything(cli: Cli) -> None:
    add_all(cli, *HASH)
    cli.json(*NONE, "add", "written without a vector")
    report = cli.json(*HASH, "reindex")
    assert list(report) == REPORT_KEYS
    assert (report["embedded"], report["remaining"]) == (len(CONTENTS) + 1, 0)
    assert cli.json(*HASH, "reindex")["embedded"] == len(CONTENTS) + 1


def test_human_embed_and_reindex_name_the_embedder(cli: Cli) -> None:
    add_all(cli, *NONE)
    embedded = cli.ok(*HASH, "embed")
    assert embedded.stdout.startswith(f"embedded {len(CONTENTS)} records with hash:")
    assert embedded.stdout.endswith("; backlog now 0\n")
    assert embedded.stderr.startswith("embedder: hash:")

    reindexed = cli.ok(*HASH, "reindex")
    assert reindexed.stdout.startswith(f"re-embedded {len(CONTENTS)} records with hash:")
    assert reindexed.stderr.startswith("embedder: hash:")

    assert cli.ok(*HASH, "embed", "--json").stderr == ""


@pytest.mark.parametrize("command", ["embed", "reindex"])
def test_embed_and_reindex_need_an_embedder(cli: Cli, command: str) -> None:
    add_all(cli, *NONE)
    result = cli.fails(1, *NONE, command)
    assert result.stdout == ""
    assert result.stderr.startswith("error: erstwhile.search.semantic_unavailable: ")
    assert len(result.stderr.splitlines()) == 1


def test_semantic_search_reports_the_semantic_lane(cli: Cli) -> None:
    ids = add_all(cli, *HASH)
    data = cli.json(*HASH, "search", "tea every morning", "--ranking", "semantic")
    assert data["ranking"] == "semantic"
    assert data["hits"][0]["record"]["id"] == ids[1]
    assert all(set(hit["signals"]) == {"semantic"} for hit in data["hits"])


@pytest.mark.parametrize(
    ("ranking", "answered"),
    [("hybrid", "hybrid"), ("auto", "hybrid"), ("lexical", "lexical"), ("semantic", "semantic")],
)
def test_every_ranking_works_with_an_embedder(cli: Cli, ranking: str, answered: str) -> None:
    ids = add_all(cli, *HASH)
    data = cli.json(*HASH, "search", "tea", "--ranking", ranking)
    assert data["ranking"] == answered
    assert data["warnings"] == []
    assert data["hits"][0]["record"]["id"] == ids[1]
    lanes = set(data["hits"][0]["signals"])
    assert lanes == {"hybrid": {"lexical", "semantic"}}.get(answered, {answered})


def test_semantic_search_without_an_embedder_fails(cli: Cli) -> None:
    add_all(cli, *NONE)
    result = cli.fails(1, *NONE, "search", "tea", "--ranking", "semantic")
    assert result.stderr.startswith("error: erstwhile.search.semantic_unavailable: ")


def test_human_search_names_the_embedder_and_the_lanes(cli: Cli, text: Plain) -> None:
    ids = add_all(cli, *HASH)
    result = cli.ok(*HASH, "search", "tea")
    assert result.stderr.startswith("embedder: hash:")
    assert "ranking: hybrid" in result.stderr
    table = text(result.stdout)
    assert table.startswith("# score lanes id content valid ")
    assert f"LS {ids[1]} Bob drinks tea" in table

    semantic = cli.ok(*HASH, "search", "tea", "--ranking", "semantic")
    assert f"S {ids[1]} Bob drinks tea" in text(semantic.stdout)
    assert "ranking: semantic" in semantic.stderr


def test_the_embedder_comes_from_the_environment(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "none")
    add_all(cli)
    assert cli.json("search", "tea")["ranking"] == "lexical"
    assert cli.json(*HASH, "embed")["embedded"] == len(CONTENTS)  # the option wins

    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "word2vec")
    result = cli.fails(2, "search", "tea")
    assert "--embedder" in result.stderr


def test_open_memory_passes_the_embedder_and_no_background_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def fake_open(target: str, **options: Any) -> erstwhile.Memory:
        calls.append((target, options))
        return erstwhile.Memory.__new__(erstwhile.Memory)

    monkeypatch.setattr(context.erstwhile, "open", fake_open)
    ctx = typer.Context(click.Command("erstwhile"))
    for name in ("auto", "local", "none"):
        ctx.obj = CliState(db="x.db", embedder=name)  # type: ignore[arg-type]
        open_memory(ctx)
    assert calls == [
        (
            "x.db",
            {"embedder": name, "extractor": "none", "background_jobs": False, "create": True},
        )
        for name in ("auto", "local", "none")
    ]

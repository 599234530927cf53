"""What a new user ran into on a first try: each case failed before its fix."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer
from tests.support.scripts import erstwhile_script
from typer.main import get_command

from erstwhile.cli import app

if TYPE_CHECKING:
    from conftest import Cli


@pytest.mark.parametrize(
    "command",
    [
        ["search", "x"],
        ["get", "some-id"],
        ["history", "some-id"],
        ["invalidate", "some-id"],
        ["expire", "--kind", "log", "--action", "invalidate", "--max-rows", "1"],
        ["embed"],
    ],
)
def test_a_read_never_creates_a_store(tmp_path: Path, command: list[str]) -> None:
    from typer.testing import CliRunner

    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = CliRunner().invoke(app, ["--db", str(missing), *command])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: erstwhile.not_found: no database at {missing}")
    assert not (tmp_path / "no").exists()  # no folder, no database


def test_expire_with_no_scope_needs_all(cli: Cli) -> None:
    for n in range(3):
        cli.add(f"note {n}", "--kind", "log" if n else "note", "--tag", "t")
    refused = cli.fails(2, "expire", "--action", "soft_delete", "--max-rows", "10")
    assert refused.stderr.startswith("error: erstwhile.input.invalid: ")
    assert "--all" in refused.stderr
    assert len(cli.search_ids("note")) == 3  # nothing was touched
    assert cli.json("expire", "--kind", "log", "--action", "soft_delete", "--max-rows", "9") == {
        "affected": 2
    }
    # --all with a scope is a contradiction, refused rather than guessed at
    both = cli.fails(
        2, "expire", "--all", "--tag", "t", "--action", "invalidate", "--max-rows", "1"
    )
    assert "drop" in both.stderr
    assert cli.json("expire", "--all", "--action", "soft_delete", "--max-rows", "9") == {
        "affected": 1
    }
    assert cli.search_ids("note") == []


def test_supersede_keeps_what_it_does_not_change(cli: Cli) -> None:
    old = cli.add("v1", "--kind", "fact", "--tag", "car", "--meta", "team=core", "--key", "k")
    new = cli.json("supersede", old, "v2")["ids"][0]
    record = cli.json("get", new)
    assert (record["kind"], record["tags"], record["metadata"], record["key"]) == (
        "fact", ["car"], {"team": "core"}, "k",
    )  # fmt: skip
    newer = cli.json("get", cli.json("supersede", new, "v3", "--tag", "bike")["ids"][0])
    assert (newer["kind"], newer["tags"]) == ("fact", ["bike"])


def test_the_unembedded_warning_is_printed_once(cli: Cli) -> None:
    from typer.testing import CliRunner

    runner = CliRunner()
    base = ["--db", str(cli.db)]
    assert runner.invoke(app, [*base, "--embedder", "none", "add", "a car"]).exit_code == 0
    result = runner.invoke(app, [*base, "--embedder", "hash", "search", "car"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "vector" in line or "embedded" in line]
    assert len(lines) == 1, result.stderr


def _commands(group: typer.Typer) -> list[list[str]]:
    root = get_command(group)
    paths: list[list[str]] = [[]]
    for name, command in getattr(root, "commands", {}).items():
        paths.append([name])
        paths += [[name, sub] for sub in getattr(command, "commands", {})]
    return paths


def test_boolean_flags_read_as_flags_in_every_help(cli: Cli) -> None:
    for path in _commands(app):
        text = cli.ok(*path, "--help").stdout
        assert "<bool>" not in text, (path, text)
    assert "--json" in cli.ok("search", "--help").stdout
    refused = cli.fails(2, "search", "x", "--json", "true")
    assert refused.stderr.startswith("error: erstwhile.input.invalid: ")


def test_usage_errors_are_one_line_with_a_code(cli: Cli) -> None:
    for args in (["nosuch"], ["search", "x", "--ranking", "best"], ["expire", "--max-rows", "1"]):
        result = cli.fails(2, *args)
        assert result.stderr.startswith("error: erstwhile.input.invalid: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_truncated_json_line_is_reported_where_it_ends(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_text('{"content": "a"}\n{"content": "abc", "kind"\n')
    result = cli.fails(2, "import", str(source))
    assert "line 2 is not valid JSON" in result.stderr
    assert "column 26" in result.stderr and "truncated" in result.stderr
    assert cli.search_ids("a") == []  # all or nothing


def test_get_a_version_of_an_unknown_record(cli: Cli) -> None:
    cli.add("something", "--id", "here")
    result = cli.fails(1, "get", "nope", "--version", "3")
    assert "record 'nope' does not exist" in result.stderr


def test_empty_content_is_refused(cli: Cli) -> None:
    for content in ("", "   "):
        result = cli.fails(2, "add", content)
        assert result.stderr.startswith("error: erstwhile.input.invalid: records[0].content")


def test_serve_with_a_port_out_of_range_names_the_option(tmp_path: Path) -> None:
    result = subprocess.run(
        [erstwhile_script(), "--db", str(tmp_path / "x.db"), "serve", "--port", "99999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: erstwhile.input.invalid: ")
    assert "--port" in result.stderr and "config.server.port" not in result.stderr
    assert "Traceback" not in result.stderr

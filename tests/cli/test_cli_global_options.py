"""Global options where users type them, and help texts that are whole.

``--db``, ``--config``, ``--embedder``, ``--extractor`` and ``--json`` are accepted
before the command, after it, and after a group's subcommand; given twice, the later
one wins. Every command's ``--help`` renders each help text whole (rich markup once
swallowed ``[extraction]``, leaving "(configured in )")."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.support.scripts import erstwhile_script
from typer.main import get_command
from typer.testing import CliRunner

from erstwhile.cli import app

if TYPE_CHECKING:
    from conftest import Cli


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _paths(sub, (*path, name))


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


ROOT = get_command(app)
COMMANDS = [path for path in _paths(ROOT) if path]
GLOBALS = {
    "--db": "{db}",
    "--config": "{config}",
    "--embedder": "hash",
    "--extractor": "heuristic",
    "--json": None,
}


def _globals(db: Path, config: Path) -> list[str]:
    args: list[str] = []
    for option, value in GLOBALS.items():
        args.append(option)
        if value is not None:
            args.append(value.format(db=db, config=config))
    return args


def test_the_global_options_are_the_roots() -> None:
    """The table above is every global option the root has (--version aside)."""
    root_options = {opt for param in ROOT.params for opt in param.opts}
    assert root_options - {"--version", "-c"} == set(GLOBALS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_global_option_is_accepted_after_every_command(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    config = tmp_path / "erstwhile.toml"
    config.write_text("")
    args = [*path, *_globals(tmp_path / "x.db", config), "--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, (args, result.output)
    assert f"Usage: erstwhile {' '.join(path)}" in result.stdout


def test_search_with_the_embedder_after_the_command_through_the_console_script(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERSTWHILE_")}
    env["ERSTWHILE_DB"] = str(tmp_path / "m.db")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([erstwhile_script(), *args], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    added = run("add", "The user drives a red car", "--embedder", "hash")
    assert added.returncode == 0, added.stderr
    found = run("search", "car", "--embedder", "hash", "--json")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert [hit["record"]["content"] for hit in answer["hits"]] == ["The user drives a red car"]
    assert answer["ranking"] == "hybrid"  # the hash embedder ran: semantic lane too
    table = run("search", "car", "--embedder", "hash")
    assert table.returncode == 0 and "red car" in table.stdout


def test_db_after_the_command_and_the_later_one_wins(tmp_path: Path) -> None:
    runner = CliRunner()
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    added = runner.invoke(app, ["--db", str(first), "add", "a note", "--db", str(second)])
    assert added.exit_code == 0, added.output
    assert second.exists() and not first.exists()
    found = runner.invoke(app, ["search", "note", "--json", "--db", str(second)])
    assert found.exit_code == 0, found.output
    assert len(json.loads(found.stdout)["hits"]) == 1


def test_embedder_after_the_command_and_the_later_one_wins(cli: Cli) -> None:
    cli.add("tea with lemon")
    assert cli.json("search", "tea", "--embedder", "none")["ranking"] == "lexical"
    later = cli.json("--embedder", "none", "search", "tea", "--embedder", "hash")
    assert later["ranking"] == "hybrid"
    assert cli.json("--embedder", "hash", "search", "tea")["ranking"] == "hybrid"


def test_json_before_or_after_the_command(cli: Cli) -> None:
    record_id = cli.add("tea with lemon")
    before = cli.ok("--json", "get", record_id)
    after = cli.ok("get", record_id, "--json")
    assert json.loads(before.stdout)["id"] == json.loads(after.stdout)["id"] == record_id
    assert json.loads(cli.ok("--json", "token", "list").stdout) == []
    assert json.loads(cli.ok("token", "list", "--json").stdout) == []


def test_extractor_after_the_command(cli: Cli) -> None:
    cli.add("Ada Lovelace works at Apollo Labs")
    report = cli.json("extract", "--extractor", "heuristic")
    assert (report["extracted"], report["extractor_id"]) == (1, "heuristic")


def test_config_after_the_command_and_after_a_groups_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ERSTWHILE_EMBEDDER")  # it would override the config's embedder
    db = tmp_path / "configured.db"
    config = tmp_path / "erstwhile.toml"
    config.write_text(f'[storage]\nurl = "{db}"\n[embedding]\nprovider = "none"\n')
    runner = CliRunner()
    created = runner.invoke(app, ["token", "create", "--name", "ci", "--config", str(config)])
    assert created.exit_code == 0, created.output
    listed = runner.invoke(app, ["token", "list", "--json", "-c", str(config)])
    assert [t["name"] for t in json.loads(listed.stdout)] == ["ci"]
    added = runner.invoke(app, ["add", "tea with lemon", "--config", str(config)])
    assert added.exit_code == 0, added.output
    found = runner.invoke(app, ["search", "tea", "--json", "--config", str(config)])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["ranking"] == "lexical"  # [embedding] provider = "none"
    assert len(json.loads(found.stdout)["hits"]) == 1


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


EMPTY = re.compile(r"\(\s*\)|\[\s*\]|\{\s*\}|\(\s*[^()]*\s(in|of|from|at|see)\s*\)")


@pytest.mark.parametrize("path", [p for p, _ in _commands(ROOT)], ids=lambda p: " ".join(p))
def test_every_help_is_whole(path: tuple[str, ...]) -> None:
    command = dict(_commands(ROOT))[path]
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    shown = _plain(result.stdout)
    assert not EMPTY.search(shown), EMPTY.search(shown)
    # every text rendered whole: none of it was taken for markup and dropped
    texts = [param.help for param in command.params if getattr(param, "help", None)]
    texts.append((command.help or "").split("\n\n")[0])
    for text in texts:
        assert _plain(text).replace("\\[", "[") in shown, text

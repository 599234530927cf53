"""Configuration reaches every command the same way: the config file (``--config`` or
``ERSTWHILE_CONFIG``), the ``ERSTWHILE_*`` settings variables, then the global
options. Shown with a real ``command`` extractor (a tiny program on stdin/stdout),
which only ``serve`` could once use: ``--extractor command extract`` said
"extraction.command is required"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from erstwhile.cli import app
from erstwhile.config import Settings

PROGRAM = """\
import json, sys
request = json.load(sys.stdin)
names = [w.strip(".,") for w in request["text"].split() if w[:1].isupper()]
json.dump({"entities": [{"name": n, "kind": "person"} for n in names],
           "facts": [{"subject": names[0], "predicate": "works_at", "object": names[-1]}]},
          sys.stdout)
"""


@pytest.fixture
def extractor_argv(tmp_path: Path) -> list[str]:
    program = tmp_path / "extractor.py"
    program.write_text(PROGRAM)
    return [sys.executable, str(program)]


def _toml_list(argv: list[str]) -> str:
    return json.dumps(argv)  # a JSON list of strings is a TOML array


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _extract_and_list(db: Path, *options: str, env: dict[str, str] | None = None) -> None:
    added = _run("--db", str(db), "add", "Ada works at Apollo", env=env)
    assert added.exit_code == 0, added.output
    extracted = _run("--db", str(db), *options, "extract", "--json", env=env)
    assert extracted.exit_code == 0, extracted.output
    report = json.loads(extracted.stdout)
    assert (report["extracted"], report["extractor_id"]) == (1, "command")
    listed = _run("--db", str(db), *options, "entities", "--json", env=env)
    assert listed.exit_code == 0, listed.output
    names = sorted(entity["name"] for entity in json.loads(listed.stdout)["entities"])
    assert names == ["Ada", "Apollo"]


def test_the_config_files_extractor_reaches_extract(
    tmp_path: Path, extractor_argv: list[str]
) -> None:
    config = tmp_path / "erstwhile.toml"
    config.write_text(
        f'[extraction]\nprovider = "command"\ncommand = {_toml_list(extractor_argv)}\n'
    )
    _extract_and_list(tmp_path / "m.db", "--config", str(config))


def test_extractor_option_with_the_command_from_the_config(
    tmp_path: Path, extractor_argv: list[str]
) -> None:
    db = tmp_path / "m.db"
    unset = _run("--db", str(db), "--extractor", "command", "extract")
    assert unset.exit_code == 2 and "extraction.command" in unset.stderr
    assert not db.exists()  # refused before the store opened
    config = tmp_path / "erstwhile.toml"  # provider left at "none": the option names it
    config.write_text(f"[extraction]\ncommand = {_toml_list(extractor_argv)}\n")
    _extract_and_list(db, "--extractor", "command",
                      env={"ERSTWHILE_CONFIG": str(config)})  # fmt: skip


def test_the_extractor_from_settings_variables_alone(
    tmp_path: Path, extractor_argv: list[str]
) -> None:
    env = {
        "ERSTWHILE_EXTRACTION__PROVIDER": "command",
        "ERSTWHILE_EXTRACTION__COMMAND": json.dumps(extractor_argv),
    }
    _extract_and_list(tmp_path / "m.db", env=env)


def test_a_bad_config_is_reported_by_every_command_and_changes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[extraction\n")
    db = tmp_path / "m.db"
    for args in (["add", "x"], ["search", "x"], ["token", "list"]):
        result = _run("--db", str(db), "--config", str(bad), *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("error: erstwhile.input.invalid: config file ")
        assert "is not valid TOML" in result.stderr
    assert not db.exists()


def test_settings_tables_are_the_configs() -> None:
    """The CLI reads the config only when there is one: it tells the settings
    variables apart by these names, which must be the config's top-level tables."""
    from erstwhile.cli.context import SETTINGS_TABLES

    assert set(SETTINGS_TABLES) == set(Settings.model_fields)

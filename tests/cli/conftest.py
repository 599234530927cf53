"""Fixtures for the CLI tests: a real SQLite file in tmp_path, driven by CliRunner."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from erstwhile.cli import app


class Cli:
    """Runs ``erstwhile --db <file> ARGS...`` in process, with small helpers."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(self, *args: str) -> Result:
        return self.runner.invoke(app, ["--db", str(self.db), *args])

    def ok(self, *args: str) -> Result:
        result = self(*args)
        assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").stdout)

    def add(self, content: str, *options: str) -> str:
        """Adds a record and returns its id."""
        return str(self.json("add", content, *options)["ids"][0])

    def search_ids(self, query: str, *options: str) -> list[str]:
        return [hit["record"]["id"] for hit in self.json("search", query, *options)["hits"]]

    def fails(self, code: int, *args: str) -> Result:
        result = self(*args)
        assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        assert "Traceback" not in result.output
        return result


def plain(text: str) -> str:
    """Text with rich's box drawing removed and whitespace collapsed."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No user database or namespace, plain pipe-width output whatever the CI sets, and
    the hash embedder (fast and deterministic, no model to load) unless a test passes
    ``--embedder``."""
    for name in ("ERSTWHILE_DB", "ERSTWHILE_NAMESPACE", "COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "hash")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "cli.db")


@pytest.fixture
def text() -> Any:
    """:func:`plain`, as a fixture so test modules need not import conftest."""
    return plain

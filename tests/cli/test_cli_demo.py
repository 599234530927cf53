"""``erstwhile demo`` runs offline on a throwaway database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from erstwhile.cli import app

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]


def test_demo_tells_the_story_on_a_temporary_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: Plain
) -> None:
    untouched = tmp_path / "real-memory.db"
    monkeypatch.setenv("ERSTWHILE_DB", str(untouched))

    result = CliRunner().invoke(app, ["demo"])

    assert result.exit_code == 0, result.output
    out = text(result.stdout)
    assert "Alice works at Acme" in out
    assert "Alice works at Globex" in out
    now = out[out.index("Ask now") : out.index("Ask as of")]
    then = out[out.index("Ask as of") : out.index("History")]
    assert "Globex" in now and "Acme" not in now
    assert "Acme" in then and "Globex" not in then
    assert "2023-01-01 → 2024-06-01" in out
    assert not untouched.exists()  # the user's database is never touched


def test_demo_can_keep_its_data(cli: Cli, tmp_path: Path) -> None:
    kept = tmp_path / "demo.db"
    for _ in range(2):  # each run uses a fresh namespace, so re-running works
        result = cli.ok("demo", "--db", str(kept))
        assert "Globex" in result.stdout
    assert kept.exists()
    assert not cli.db.exists()

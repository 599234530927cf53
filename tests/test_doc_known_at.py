"""docs/time.md's record-time example is true: its code runs, and its asserts hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _example() -> str:
    text = (ROOT / "docs" / "time.md").read_text()
    section = text.split("## Record time", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2  # the worked example, then history with every version
    return "".join(blocks)


def test_the_worked_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "hash")  # offline and fast; the example is lexical
    code = _example()
    assert "known_at=recorded" in code and "versions=True" in code
    scope: dict[str, object] = {}
    exec(compile(code, "docs/time.md", "exec"), scope)  # our own document
    scope["m"].close()  # type: ignore[attr-defined]

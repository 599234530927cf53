"""The README's LangGraph snippet runs as written and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = README.read_text().split("## LangGraph\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    # the snippet's default embedder is the local model when installed; what it shows
    # does not depend on the model, and hashing spares the test loading one
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "hash")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme"})
    assert printed.getvalue().splitlines() == [
        "I remember: I sold it, now I drive a blue car",
        "['I drive a red car', 'I sold it, now I drive a blue car']",
    ]

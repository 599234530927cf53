"""docs/langgraph.md's first snippet runs as written and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"


def test_the_docs_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = re.search(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    # the snippet's default embedder is the local model when installed; what it shows
    # does not depend on the model, and hashing spares the test loading one
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "hash")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), "docs/langgraph.md", "exec"), {"__name__": "docs"})
    assert printed.getvalue().splitlines() == [
        "I remember: I sold it, now I drive a blue car",
        "['I drive a red car', 'I sold it, now I drive a blue car']",
    ]

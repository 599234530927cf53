"""The standing fault suite (kill -9, concurrent writers, fuzz, auth matrix, raw-byte
scans). Each test adds to :data:`tests.faults.figures.FIGURES`; the totals are
printed in a terminal summary section at the end of the run.

To extend it for a new job or interface, add a test module here that drives the real
thing (a subprocess, a server, a real client) and counts what it saw."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.faults.figures import FIGURES
from tests.faults.server import Secrets, serve
from tests.server.harness import Server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Secrets]]:
    """A real ``erstwhile serve`` (auth on) and its tokens, one per test module."""
    yield from serve(tmp_path_factory)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES.counts:
        return
    terminalreporter.section("erstwhile fault suite figures")
    for line in FIGURES.lines():
        terminalreporter.write_line(line)

"""A store with the heuristic extractor, on each backend (SQLite and PostgreSQL), and
the embedding tests' fake HTTP server (for the http extractor)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.embedding.conftest import server  # noqa: F401 - the fake HTTP server, shared

import erstwhile


@pytest.fixture
def graph(store_target: str) -> Iterator[erstwhile.Memory]:
    """No embedder (lexical search is enough to seed expansion), extraction by hand."""
    m = erstwhile.open(store_target, embedder="none", extractor="heuristic", background_jobs=False)
    yield m
    m.close()

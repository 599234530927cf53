from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import memstrata


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db_path: Path) -> Iterator[memstrata.Memory]:
    # the hash embedder: vectors are written and searched, without loading a model
    m = memstrata.open(db_path, embedder="hash", background_jobs=False)
    yield m
    m.close()

"""Runs LangGraph's own store test module (test_store.py, vendored unmodified; see
ORIGIN.md) against ErstwhileStore. This conftest is the only adapter:

- the module builds its stores with ``InMemoryStore(...)``; an autouse fixture binds
  that name, in the module only, to a ErstwhileStore that opens a fresh erstwhile
  memory on the test's backend (each test runs on SQLite and on PostgreSQL). An
  ``index={"dims", "embed", "fields"}`` becomes erstwhile's embedder (the module's
  CharacterEmbeddings through LangChainEmbedder) and the store's fields;
- ``tests.embed_test_utils`` (the module's import of its helper) is the vendored file;
- its ``async def`` tests run on anyio's pytest plugin, as the rest of erstwhile's do;
- the tests that cannot apply to a store other than InMemoryStore are marked xfail
  (strict, so one that starts passing is noticed), each with its reason (NOT_APPLICABLE).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import erstwhile
from erstwhile.langgraph import ErstwhileStore, LangChainEmbedder

HERE = Path(__file__).parent


def _load_helper() -> None:
    path = HERE / "embed_test_utils.py"
    spec = importlib.util.spec_from_file_location("tests.embed_test_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests.embed_test_utils"] = module
    spec.loader.exec_module(module)


_load_helper()

NOT_APPLICABLE = {
    "test_vector_store_initialization": (
        "asserts InMemoryStore's own attribute index_config, which holds its embedding "
        "model; ErstwhileStore's vectors are erstwhile's embedder's, the store keeps fields"
    ),
    "test_embed_with_path": (
        "asserts that two items equally similar to the query get equal scores under "
        "per-field vectors max-pooled; erstwhile keeps one vector per record (the joined "
        "text of the indexed fields) and a hybrid score is a rank-based RRF sum, so two "
        "hits never tie"
    ),
}


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Marks the module's coroutine tests for anyio before its plugin collects them."""
    if name.startswith("test") and inspect.iscoroutinefunction(obj):
        pytest.mark.anyio(obj)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not str(item.path).startswith(str(HERE)):
            continue
        name = getattr(item, "originalname", item.name)
        if name in NOT_APPLICABLE:
            item.add_marker(pytest.mark.xfail(reason=NOT_APPLICABLE[name], strict=True))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def erstwhile_in_memory_store(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """``InMemoryStore`` in the test module is a ErstwhileStore on this test's backend."""
    opened: list[Any] = []
    targets: list[str] = []
    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None

    class InMemoryStore(ErstwhileStore):
        def __init__(self, *, index: dict[str, Any] | None = None) -> None:
            if server is not None:
                target = server.new_target()
                targets.append(target)
            else:
                target = str(tmp_path / f"store-{len(opened)}.db")
            embedder: Any = "hash"
            if index:
                embedder = LangChainEmbedder(index["embed"], index["dims"])
            memory = erstwhile.open(target, embedder=embedder, background_jobs=False)
            opened.append(memory)
            fields = (index or {}).get("fields")
            super().__init__(memory, index={"fields": fields} if fields else None)

    monkeypatch.setattr(request.module, "InMemoryStore", InMemoryStore)
    yield
    for memory in opened:
        memory.close()
    if server is not None:
        for target in targets:
            server.drop_target(target)

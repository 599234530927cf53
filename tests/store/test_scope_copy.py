"""SQLite's in-memory scope copy: which searches it decides, and that it follows the
file (writes through another handle, a hard delete, a bulk change that reloads it).
The scope rules themselves are checked against a brute-force model in
test_temporal_oracle.py, which runs every search through this copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from erstwhile.domain.search import SearchRequest
from erstwhile.store.sqlite import scope_cache


def semantic_ids(memory: erstwhile.Memory, **options: Any) -> list[str]:
    return sorted(
        memory.search("ns", "river stone", ranking="semantic", top_k=100, **options).ids()
    )


def test_every_field_the_copy_serves_is_a_search_option() -> None:
    assert set(SearchRequest.model_fields) >= scope_cache.SERVED
    assert "key" not in scope_cache.SERVED


def test_served_falls_back_for_a_key_or_an_option_it_does_not_know() -> None:
    assert scope_cache.served(SearchRequest(query="x", tags=["a"], as_of="2024-01-01"))
    assert not scope_cache.served(SearchRequest(query="x", key="k"))
    assert scope_cache.served(SearchRequest(query="x", key=None))


def test_the_copy_follows_another_handle_and_a_hard_delete(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    reader = erstwhile.open(path, embedder="hash", background_jobs=False)
    reader.service.store.dialect._scopes.warm_after = 1  # type: ignore[attr-defined]
    writer = erstwhile.open(path, embedder="hash", background_jobs=False)
    try:
        writer.upsert("ns", [
            {"id": "a", "content": "river stone", "tags": ["t"], "metadata": {"room": "r1"}},
            {"id": "b", "content": "river cloud", "metadata": {"room": "r2"}},
        ])  # fmt: skip
        # enough other records that one change is patched in, not a reload
        writer.upsert("other", [{"id": f"x{i}", "content": "river"} for i in range(20)])
        assert semantic_ids(reader) == ["a", "b"]
        cache = reader.service.store.dialect._scopes  # type: ignore[attr-defined]
        loaded = cache.seq
        assert loaded > 0  # the search was decided by the copy
        writer.upsert("ns", [{"id": "b", "content": "river cloud", "tags": ["t"]}])
        assert semantic_ids(reader, tags=["t"]) == ["a", "b"]
        assert semantic_ids(reader, filter={"room": "r2"}) == []  # b's metadata is gone
        writer.delete("ns", "a")
        assert semantic_ids(reader) == ["b"]
        assert semantic_ids(reader, include_historical=True) == ["a", "b"]
        writer.delete("ns", "a", hard=True)
        assert semantic_ids(reader, include_historical=True) == ["b"]
        # the best match is gone from the scope, so it cannot take the one slot
        best = reader.search("ns", "river stone", ranking="semantic", top_k=1,
                             include_historical=True)  # fmt: skip
        assert best.ids() == ["b"]
        assert cache.seq > loaded  # caught up incrementally or by a reload, never stale
        # a key search is decided in SQL, and agrees
        writer.upsert("ns", [{"id": "c", "content": "river stone", "key": "k"}])
        assert semantic_ids(reader, key="k") == ["c"]
    finally:
        reader.close()
        writer.close()


def test_many_changes_reload_the_copy_from_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    reader = erstwhile.open(path, embedder="hash", background_jobs=False)
    reader.service.store.dialect._scopes.warm_after = 1  # type: ignore[attr-defined]
    writer = erstwhile.open(path, embedder="hash", background_jobs=False)
    try:
        writer.upsert("ns", [{"id": f"r{i}", "content": "river stone"} for i in range(8)])
        assert len(semantic_ids(reader)) == 8
        cache = reader.service.store.dialect._scopes  # type: ignore[attr-defined]
        before = cache.tenants["ns"]
        # more changes than a quarter of the copy: it is rebuilt rather than patched
        writer.upsert("ns", [{"id": f"r{i}", "content": "river stone", "tags": ["new"]}
                             for i in range(8)])  # fmt: skip
        assert len(semantic_ids(reader, tags=["new"])) == 8
        assert cache.tenants["ns"] is not before
        rowids = cache.tenants["ns"].rowid[: cache.tenants["ns"].count]
        assert np.unique(rowids).shape[0] == 8
    finally:
        reader.close()
        writer.close()


def test_a_process_that_searches_once_or_twice_never_builds_the_copy(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [{"id": f"r{i}", "content": "river stone"} for i in range(5)])
        cache = m.service.store.dialect._scopes  # type: ignore[attr-defined]
        for searches in range(1, scope_cache.WARM_AFTER + 1):
            assert len(semantic_ids(m)) == 5
            assert (cache.seq >= 0) == (searches >= scope_cache.WARM_AFTER)

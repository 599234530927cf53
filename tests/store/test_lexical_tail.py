"""SQLite's tail: a write's documents wait in ``lexical_docs`` with no postings until
merged, and a search scores them from its process's copy of the tail. Two stores open
on one file (two processes' copies) write, replace, delete and merge in turn: each
ranks, to the last bit, as the same file does once everything is merged, and as a
store whose every write was merged at once."""

from __future__ import annotations

import contextlib
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.raw import scalar

import erstwhile
from erstwhile.store.sqlite import lexical_merge

WORDS = ["river", "stone", "mill", "cloud", "house", "water", "quiet", "old"]
QUERIES = ["river", "stone mill", "quiet water old", "house cloud river stone"]

_content = st.lists(st.sampled_from([*WORDS, "..."]), min_size=1, max_size=6).map(" ".join)
_op = st.one_of(
    st.tuples(st.just("upsert"), st.integers(0, 1), st.lists(
        st.tuples(st.integers(0, 11), _content), min_size=1, max_size=5)),
    st.tuples(st.just("delete"), st.integers(0, 1), st.integers(0, 11), st.booleans()),
    st.tuples(st.just("merge"), st.integers(0, 1), st.just(None)),
    st.tuples(st.just("search"), st.integers(0, 1), st.just(None)),
)  # fmt: skip


def _ranked(m: erstwhile.Memory, ns: str = "ns") -> list[list[tuple[str, float]]]:
    return [[(h.record.id, h.score) for h in m.search(ns, q, ranking="lexical", top_k=20).hits]
            for q in QUERIES]  # fmt: skip


def _merge(m: erstwhile.Memory) -> None:
    store = m.service.store
    store.db.write(partial(lexical_merge.merge_tail, store.dialect))


def _apply(m: erstwhile.Memory, op: tuple[Any, ...]) -> None:
    kind, _, arg = op[0], op[1], op[2]
    if kind == "upsert":
        latest = {f"r{i}": content for i, content in arg}
        m.upsert("ns", [{"id": rid, "content": c} for rid, c in latest.items()])
    elif kind == "delete":
        with contextlib.suppress(erstwhile.NotFound):
            m.delete("ns", f"r{arg}", hard=op[3])
    elif kind == "merge":
        _merge(m)
    else:
        _ranked(m)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_op, min_size=1, max_size=12), bound=st.sampled_from([2, 7, 10**9]))
def test_two_copies_of_the_tail_rank_as_the_merged_file(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]], bound: int
) -> None:
    folder = tmp_path_factory.mktemp("tail")
    path = str(folder / "m.db")
    original = (lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX)
    lexical_merge.TAIL_ROWS = lexical_merge.TAIL_MAX = bound
    try:
        stores = [erstwhile.open(path, embedder="none", background_jobs=False) for _ in range(2)]
        try:
            for op in ops:
                _apply(stores[op[1]], op)
            seen = [_ranked(m) for m in stores]
            for m in stores:
                report = m.service.store.integrity()
                assert all(f.ok for f in report), [f.problems for f in report]
        finally:
            for m in stores:
                m.close()
        with erstwhile.open(path, embedder="none", background_jobs=False) as m:
            assert _ranked(m) == seen[0] == seen[1]  # a fresh copy of the tail
            _merge(m)
            assert scalar(path, "SELECT count(*) FROM lexical_tail") == 0
            assert _ranked(m) == seen[0]
    finally:
        lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX = original


def test_a_search_reads_the_tail_another_store_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy learns of new, replaced, removed and merged documents from the rows
    appended to the tail; a store merged after every write ranks alike."""
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 10**9)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 10**9)
    path, merged_path = str(tmp_path / "m.db"), str(tmp_path / "merged.db")
    writer = erstwhile.open(path, embedder="none", background_jobs=False)
    reader = erstwhile.open(path, embedder="none", background_jobs=False)
    merged = erstwhile.open(merged_path, embedder="none", background_jobs=False)
    steps = [
        lambda m: m.upsert("ns", [{"id": f"r{i}", "content": f"{WORDS[i % 8]} stone"}
                                  for i in range(10)]),
        lambda m: m.upsert("ns", [{"id": "r1", "content": "quiet water water"}]),
        lambda m: m.delete("ns", "r2", hard=True),
        lambda m: m.delete("ns", "r3"),
        lambda m: m.upsert("ns", [{"id": "r4", "content": "..."}]),
        lambda m: m.upsert("ns", [{"id": "n1", "content": "old mill river"}]),
    ]  # fmt: skip
    try:
        for step in steps:
            step(writer)
            step(merged)
            _merge(merged)
            assert _ranked(reader) == _ranked(merged) == _ranked(writer)
        assert scalar(path, "SELECT count(*) FROM lexical_postings") == 0
        _merge(writer)
        assert _ranked(reader) == _ranked(merged)
        writer.upsert("ns", [{"id": "r5", "content": "river river cloud"}])
        merged.upsert("ns", [{"id": "r5", "content": "river river cloud"}])
        assert _ranked(reader) == _ranked(merged) == _ranked(writer)
    finally:
        for m in (writer, reader, merged):
            m.close()


def test_a_copy_takes_a_write_s_documents_only_once_it_commits(tmp_path: Path) -> None:
    """The writer's documents reach its copy of the tail after the commit
    (``Database.on_commit``): never from a write that rolled back, nor from a savepoint
    rolled back inside one that committed."""
    with erstwhile.open(str(tmp_path / "m.db"), embedder="none", background_jobs=False) as m:
        db = m.service.store.db
        ran: list[str] = []

        def failing(tx: Any) -> None:
            db.on_commit(lambda: ran.append("rolled back"))
            raise RuntimeError("no")

        with pytest.raises(RuntimeError):
            db.write(failing)

        def partly(tx: Any) -> None:
            db.on_commit(lambda: ran.append("kept"))
            with contextlib.suppress(RuntimeError), db.atomic():
                db.on_commit(lambda: ran.append("savepoint rolled back"))
                raise RuntimeError("no")

        db.write(partly)
        assert ran == ["kept"]
        # and a write that fails after its documents were flushed leaves the copy as it was
        m.upsert("ns", [{"id": "a", "content": "river stone"}])
        before = _ranked(m)
        with pytest.raises(erstwhile.ErstwhileError):
            m.upsert("ns", [{"id": "b", "content": "river mill"},
                            {"id": "a", "content": "quiet", "if_version": 7}])  # fmt: skip
        assert _ranked(m) == before

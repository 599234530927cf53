"""The list index's runs of rows (erstwhile.store.sqlite.ann, vectors): once built, the
matrix holds each list's vectors in one run of rows, so a probe scores a run in one
pass instead of gathering it. Whatever changes after (new vectors, rewritten ones
that move to another list, withdrawn ones), a search through the runs offers exactly
the candidates the lists name, each once, at its row's exact score; a search holding
the arrays from before a regroup reads them consistently; a saved copy keeps its runs,
and one whose runs are wrong keeps its lists and gathers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sqlite import vector_file
from erstwhile.store.sqlite.vectors import VectorCache, View, _Matrix

DIMENSIONS = 8


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def built(rng: np.random.Generator, count: int) -> tuple[VectorCache, _Matrix]:
    """A matrix of ``count`` vectors (rowids 1..count, a few gaps) with its index built
    and its rows regrouped into the lists' runs."""
    cache = VectorCache()
    cache.background = False
    matrix = _Matrix(DIMENSIONS)
    rowids = np.arange(1, count + 1, dtype=np.int64) * 2  # rowids are not positions
    matrix.put(rowids, unit(rng.normal(size=(count, DIMENSIONS))))
    cache.build_index(matrix)
    assert matrix.index.runs is not None and matrix.index.layout == matrix.layout
    return cache, matrix


def the_lists(matrix: _Matrix, view: View, chosen: np.ndarray, member: Any) -> set[int]:
    """The oracle: the members of the chosen lists that are in scope and in the view."""
    held = {int(r) for i in chosen.tolist() for r in matrix.index.members[i]}
    return {r for r in held if r < view.position.shape[0] and view.position[r] >= 0
            and (member is None or member[r])}  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31),
    count=st.integers(40, 400),
    changes=st.lists(
        st.tuples(st.sampled_from(["add", "rewrite", "withdraw"]), st.integers(1, 30)),
        max_size=6,
    ),
    share=st.sampled_from([None, 0.2, 0.7]),
    limit=st.sampled_from([1, 10, 50]),
)
def test_a_search_through_the_runs_offers_what_the_lists_hold_at_exact_scores(
    seed: int, count: int, changes: list[tuple[str, int]], share: float | None, limit: int
) -> None:
    rng = np.random.default_rng(seed)
    _, matrix = built(rng, count)
    top = 2 * count
    for kind, size in changes:
        if kind == "add":
            new = np.arange(top + 1, top + size + 1, dtype=np.int64)
            top += size
            matrix.put(new, unit(rng.normal(size=(size, DIMENSIONS))))
        live = np.flatnonzero(matrix.position >= 0)
        picked = rng.choice(live, min(size, live.shape[0] - 1), replace=False)
        if kind == "rewrite":
            matrix.put(picked, unit(rng.normal(size=(picked.shape[0], DIMENSIONS))))
        elif kind == "withdraw":
            matrix.withdraw(picked)
    view = matrix.view()
    live = np.flatnonzero(view.position >= 0)
    member = None
    in_scope = live
    if share is not None:
        member = np.zeros(view.position.shape[0], dtype=bool)
        in_scope = live[rng.random(live.shape[0]) < share]
        member[in_scope] = True
    query = unit(rng.normal(size=DIMENSIONS))
    index = matrix.index
    found = index.search(member, int(in_scope.shape[0]), query, limit, view)
    if found is None:
        return
    rowids, positions, scores = found
    assert scores is not None  # scored in runs, not gathered by the caller
    assert len(set(rowids.tolist())) == rowids.shape[0]  # each candidate once
    assert (view.rowid_of[positions] == rowids).all()  # its own row
    np.testing.assert_allclose(scores, view.rows[positions] @ query, atol=1e-5)
    # the probed lists (the centroids' order, as far as the count reached): every
    # in-scope member of each, nothing else
    order = np.argsort(-(index.centroids @ query))
    for probed in range(1, order.shape[0] + 1):
        expected = the_lists(matrix, view, order[:probed], member)
        if len(expected) >= rowids.shape[0]:
            break
    assert set(rowids.tolist()) == expected
    # the same lists searched without runs (the gather path) offer the same
    runs, index.runs = index.runs, None
    try:
        gathered = index.search(member, int(in_scope.shape[0]), query, limit, view)
    finally:
        index.runs = runs
    assert gathered is not None and gathered[2] is None
    assert set(gathered[0].tolist()) == set(rowids.tolist())


def test_a_view_from_before_a_regroup_reads_its_own_arrays() -> None:
    rng = np.random.default_rng(3)
    cache, matrix = built(rng, 300)
    before = matrix.view()
    query = unit(rng.normal(size=DIMENSIONS))
    matrix.put(np.array([7]), unit(rng.normal(size=(1, DIMENSIONS))))  # row 300: a new one
    matrix.index.runs = None  # lay the rows out again: they move
    cache._regroup(matrix)
    assert matrix.index.runs is not None and matrix.index.layout == matrix.layout
    assert matrix.layout != before.layout and (matrix.position != -1).sum() == 301
    found = matrix.index.search(None, before.live, query, 10, before)
    assert found is not None
    rowids, positions, scores = found
    assert scores is None  # its layout is not the runs': gathered, from its own rows
    assert (before.rowid_of[positions] == rowids).all()
    assert 7 not in rowids.tolist()  # taken after the view was read
    # the same vectors the regrouped matrix holds for them, read from the view's rows
    assert np.array_equal(before.rows[positions], matrix.rows[matrix.position[rowids]])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31),
    changes=st.lists(
        st.tuples(st.sampled_from(["add", "rewrite", "withdraw", "readd"]), st.integers(1, 40)),
        max_size=5,
    ),
)
def test_writes_made_while_a_regroup_copies_are_carried_over(
    seed: int, changes: list[tuple[str, int]]
) -> None:
    """A regroup copies the rows outside the lock: what was added, rewritten or
    withdrawn meanwhile is in the regrouped matrix as it is in the matrix it replaces."""
    rng = np.random.default_rng(seed)
    _, matrix = built(rng, 200)
    order = np.concatenate(matrix.index.members)  # as the regroup's first step takes them
    runs = np.concatenate(([0], np.cumsum([m.shape[0] for m in matrix.index.members])))
    rows = np.empty((order.shape[0] + 8, DIMENSIONS), np.float32)  # little room: it grows
    rows[: order.shape[0]] = matrix.rows[matrix.position[order]]
    matrix.written = []
    top = 1000
    for kind, size in changes:
        live = np.flatnonzero(matrix.position >= 0)
        picked = rng.choice(live, min(size, live.shape[0] - 1), replace=False)
        if kind == "add":
            picked = np.arange(top, top + size, dtype=np.int64)
            top += size
        elif kind == "withdraw":
            matrix.withdraw(picked)
            continue
        elif kind == "readd":  # withdrawn, then given a vector again: a new row
            matrix.withdraw(picked)
        matrix.put(picked, unit(rng.normal(size=(picked.shape[0], DIMENSIONS))))
    expected = {int(r): matrix.rows[matrix.position[r]].copy()
                for r in np.flatnonzero(matrix.position >= 0)}  # fmt: skip
    written, matrix.written = matrix.written, None
    matrix.regroup(order, rows, written)
    matrix.index.grouped(matrix.position, matrix.layout, runs)
    present = np.flatnonzero(matrix.position >= 0)
    assert set(present.tolist()) == set(expected)
    assert matrix.live == len(expected)
    assert (matrix.rowid_of[matrix.position[present]] == present).all()
    for rowid in present.tolist():
        assert np.array_equal(matrix.rows[matrix.position[rowid]], expected[rowid])
    view = matrix.view()
    query = unit(rng.normal(size=DIMENSIONS))
    found = matrix.index.search(None, view.live, query, 10, view)
    assert found is not None and found[2] is not None
    assert len(set(found[0].tolist())) == found[0].shape[0]
    np.testing.assert_allclose(found[2], view.rows[found[1]] @ query, atol=1e-5)


def test_a_build_in_a_thread_beside_searches_keeps_every_answer_exact() -> None:
    rng = np.random.default_rng(5)
    cache, matrix = built(rng, 500)
    query = unit(rng.normal(size=DIMENSIONS))
    errors: list[BaseException] = []

    def search() -> None:
        try:
            for _ in range(200):
                view = cache.view(matrix)
                rowids = np.flatnonzero(view.position >= 0)
                found = cache.candidates(matrix, view, rowids, query, 10)
                if found is not None:
                    keys, at, scores, _ = found
                    assert (view.rowid_of[at] == keys).all()
                    np.testing.assert_allclose(scores, view.rows[at] @ query, atol=1e-5)
        except BaseException as error:  # reported below
            errors.append(error)

    cache.min_rows = 1
    searcher = threading.Thread(target=search)
    searcher.start()
    for _ in range(5):  # retrains: new lists, rows regrouped each time
        with cache._lock:
            matrix.index.trained = 1
        cache.build_index(matrix)
    searcher.join()
    assert not errors, errors[0]


def test_a_saved_copy_keeps_its_runs(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(vector_file, "SAVE_MIN", 50)
    path = str(tmp_path / "store.db")
    rng = np.random.default_rng(11)
    vectors = unit(rng.normal(size=(300, DIMENSIONS)))
    first = erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
    first.upsert("ns", [{"id": f"m{i}", "content": f"m {i}", "vector": v.tolist()}
                        for i, v in enumerate(vectors)])  # fmt: skip
    first.service.store.dialect._vectors.min_rows = 20  # type: ignore[attr-defined]
    first.service.store.build_vector_index(DIMENSIONS)  # type: ignore[attr-defined]
    first.close()
    (saved,) = Path(path + ".vectors").glob("*.ivf.npz")
    with np.load(saved) as arrays:
        assert "runs" in arrays.files

    def adopted() -> Any:
        memory = erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
        cache = memory.service.store.dialect._vectors  # type: ignore[attr-defined]
        cache.background, cache.min_rows, cache.min_share = False, 20, 0.2
        hit = memory.search("ns", query_vector=vectors[7].tolist(), top_k=1,
                            include_historical=True).hits[0]  # fmt: skip
        (matrix,) = cache._matrices.values()
        return memory, matrix.index, hit

    memory, index, hit = adopted()
    try:
        assert index.runs is not None  # adopted with its runs
        assert hit.record.id == "m7" and hit.signals["semantic"]["index"] == "ivf"
    finally:
        memory.close()
    with np.load(saved) as arrays:  # runs that overlap: the copy fails its checksum
        parts = {name: arrays[name] for name in arrays.files}
    parts["runs"] = parts["runs"][::-1].copy()
    with open(saved, "wb") as out:
        np.savez(out, **parts)
    memory, index, hit = adopted()
    try:  # read from the table, the lists built anew
        (matrix,) = memory.service.store.dialect._vectors._matrices.values()  # type: ignore[attr-defined]
        assert not matrix.adopted and index.ready
        assert hit.record.id == "m7" and hit.signals["semantic"]["index"] == "ivf"
    finally:
        memory.close()

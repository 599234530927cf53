"""A batch's vectors checked together (``unit_rows``) give the bits the store keeps
for each alone (``unit``), and refuse every batch one of whose vectors is bad."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.vectors import unit, unit_rows, vector_problem

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, -0.0, 1e-45, 1e-300, 1e30, 3.4e38, 3.5e38, 1e39]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_VALUES, min_size=4, max_size=4), min_size=1, max_size=6))
def test_rows_are_each_vectors_unit_or_the_batch_is_refused(vectors: list[list[float]]) -> None:
    rows = unit_rows(vectors, 4)
    if any(vector_problem(v, 4) for v in vectors):
        assert rows is None
        return
    assert rows is not None
    for vector, row in zip(vectors, rows, strict=True):
        assert row.dtype == np.float32
        assert row.tobytes() == unit(vector).tobytes()


def test_sizes_and_values_that_are_no_numbers_are_refused() -> None:
    assert unit_rows([[1.0, 2.0], [1.0]]) is None
    assert unit_rows([[1.0, 2.0]], 3) is None
    assert unit_rows([[1.0, "2"]]) is None  # type: ignore[list-item]
    assert unit_rows([[1.0, None]]) is None  # type: ignore[list-item]
    assert unit_rows([]) is None
    assert unit_rows([[]]) is None
    rows = unit_rows([[3.0, 4.0], [0.0, 2.0]])
    assert rows is not None and rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0, 1]]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_VALUES, min_size=4, max_size=4), min_size=1, max_size=4),
    st.sampled_from([np.float64, np.float32, np.float16]),
)
def test_arrays_give_the_rows_their_numbers_give(vectors: list[list[float]], dtype: type) -> None:
    """An array of real numbers is taken as the list of its numbers would be."""
    with np.errstate(over="ignore", invalid="ignore"):
        arrays = [np.asarray(v).astype(dtype) for v in vectors]
    numbers = [[float(x) for x in a] for a in arrays]
    from_arrays, from_numbers = unit_rows(arrays, 4), unit_rows(numbers, 4)
    assert (from_arrays is None) == (from_numbers is None)
    if from_arrays is not None and from_numbers is not None:
        assert from_arrays.tobytes() == from_numbers.tobytes()
    mixed = unit_rows([arrays[0], numbers[0]], 4)
    assert (mixed is None) == (unit_rows([numbers[0]] * 2, 4) is None)


def test_arrays_that_are_no_vectors_are_refused() -> None:
    assert unit_rows([np.ones((2, 2))]) is None
    assert unit_rows([np.float64(1.0)]) is None  # type: ignore[list-item]
    assert unit_rows([np.ones(2), np.ones(3)]) is None
    assert unit_rows([np.array(["1", "2"])]) is None
    assert unit_rows([np.array([1 + 1j, 2])]) is None
    assert unit_rows([np.array([1.0, None])]) is None
    assert unit_rows([np.array([1, 2], dtype=np.int64), [True, 2]]) is not None


def test_an_upsert_of_arrays_stores_what_one_of_lists_stores(tmp_path: Path) -> None:
    """``vector`` as a float32 array (a model's output) or a list: the same rows,
    the same search; a bad array is named as a bad list is."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((20, 256)).astype(np.float32)
    stored = []
    for shape in ("list", "array"):
        with erstwhile.open(tmp_path / f"{shape}.db", embedder="hash", background_jobs=False) as m:
            m.upsert("ns", [
                {"id": f"r{i}", "content": f"text {i}",
                 "vector": row.tolist() if shape == "list" else row}
                for i, row in enumerate(matrix)
            ])  # fmt: skip
            hits = m.search("ns", query_vector=matrix[3].tolist(), top_k=5).hits
            stored.append(
                ([(h.record.id, h.score) for h in hits], _vectors(tmp_path / f"{shape}.db"))
            )
            bad = matrix[0].copy()
            bad[7] = np.nan
            with pytest.raises(InvalidInput) as error:
                m.upsert("ns", [{"id": "a", "content": "x", "vector": matrix[1]},
                                {"id": "b", "content": "x", "vector": bad}])  # fmt: skip
            assert "records[1].vector" in error.value.message
    assert stored[0] == stored[1]


def _vectors(path: Path) -> list[tuple[int, bytes]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT record, vector FROM vectors ORDER BY record").fetchall()

"""A batch's vectors checked together (``unit_rows``) give the bits the store keeps
for each alone (``unit``), and refuse every batch one of whose vectors is bad."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.domain.vectors import unit, unit_rows, vector_problem

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

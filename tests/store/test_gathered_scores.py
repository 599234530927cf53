"""The vector lane's chunked gather scores exactly what one gather and one matvec do."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given

from erstwhile.store.sql import scoring


@given(
    rows=st.integers(1, 1300),
    dimensions=st.integers(1, 24),
    picked=st.data(),
    seed=st.integers(0, 2**32 - 1),
)
def test_chunked_scores_equal_a_single_gather(
    rows: int, dimensions: int, picked: st.DataObject, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((rows, dimensions)).astype(np.float32)
    query = rng.standard_normal(dimensions).astype(np.float32)
    # any positions, repeats and disorder included, across several chunks
    positions = np.asarray(
        picked.draw(st.lists(st.integers(0, rows - 1), max_size=3 * scoring.GATHER_CHUNK)),
        dtype=np.int64,
    )
    got = scoring.gathered_scores(matrix, positions, query)
    assert got.shape == positions.shape and got.dtype == np.float32
    want = matrix[positions] @ query
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

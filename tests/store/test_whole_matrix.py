"""A scope holding every row of the vector matrix is scored in matrix order with no
gather (``_Matrix.whole``): the same hits and scores as a brute force over the scope,
and a scope of as many records as the matrix has rows that is not every row (another
namespace's vectors) is never taken for one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.embedding import HashEmbedder

DIMENSIONS = 8


def _brute(vectors: dict[str, np.ndarray], query: np.ndarray, k: int) -> list[str]:
    scored = sorted(vectors, key=lambda i: (-float(vectors[i] @ query), i))
    return scored[:k]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    seed=st.integers(0, 10_000),
    mine=st.integers(1, 30),
    others=st.integers(0, 10),
    rewritten=st.booleans(),
)
def test_every_row_in_scope_ranks_as_brute_force(
    tmp_path: Path, seed: int, mine: int, others: int, rewritten: bool
) -> None:
    rng = np.random.default_rng(seed)
    path = str(tmp_path / f"s{seed}-{mine}-{others}-{rewritten}.db")
    memory = erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
    try:
        rows = rng.normal(size=(mine + others + 1, DIMENSIONS))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        vectors = {f"m{i:02d}": rows[i].astype(np.float32) for i in range(mine)}
        memory.upsert("ns", [{"id": i, "content": "x", "vector": v.tolist()}
                             for i, v in vectors.items()])  # fmt: skip
        if others:
            other = [{"id": f"o{i}", "content": "x", "vector": rows[mine + i].tolist()}
                     for i in range(others)]  # fmt: skip
            memory.upsert("other", other)
        if rewritten:  # a vector rewritten in place
            vectors["m00"] = rows[-1].astype(np.float32)
            memory.upsert("ns", [{"id": "m00", "content": "x", "vector": rows[-1].tolist()}])
        memory.service.store.dialect._vectors.min_rows = 1 << 62  # type: ignore[attr-defined]
        for _ in range(4):  # past the scope copy's warm-up
            query = rng.normal(size=DIMENSIONS)
            query /= np.linalg.norm(query)
            k = int(rng.integers(1, mine + 2))
            found = memory.search("ns", query_vector=query.tolist(), top_k=k,
                                  include_historical=True)  # fmt: skip
            assert found.ids() == _brute(vectors, query.astype(np.float32), k)
            for hit in found.hits:
                assert abs(hit.score - float(vectors[hit.record.id] @ query)) < 1e-5
    finally:
        memory.close()

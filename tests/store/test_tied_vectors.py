"""Records with the same vector tie, and a tie ranks by id, wherever the records sit.

BLAS rounds one vector's score differently at different rows of a matrix (about one
float32 ulp), so before ``scoring.rescored`` two identical vectors could come out a
hair apart in the in-process matrices and the later-written one could win its tie,
while the SQL lane ranked by id. Checked on both backends against a float64 oracle,
with ids written out of order so that matrix order and id order differ.
"""

from __future__ import annotations

import itertools
from typing import Any

import hypothesis.strategies as st
import numpy as np
from hypothesis import HealthCheck, given, settings

import erstwhile

DIMENSIONS = 256  # the "hash" embedder's
_NAMESPACES = itertools.count()


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    groups=st.integers(1, 5),
    size=st.integers(2, 40),
    top_k=st.integers(1, 8),
    filtered=st.booleans(),
)
def test_identical_vectors_tie_and_rank_by_id(
    memory: erstwhile.Memory, seed: int, groups: int, size: int, top_k: int, filtered: bool
) -> None:
    rng = np.random.default_rng(seed)
    namespace = f"ns{next(_NAMESPACES)}"  # a fresh one for every example
    vectors = [_unit(rng.standard_normal(DIMENSIONS)) for _ in range(groups)]
    group = rng.integers(0, groups, size)
    room = rng.choice(["a", "b"], size)
    names = [f"r{i:03d}" for i in rng.permutation(size)]  # written out of id order
    memory.upsert(namespace, [
        {"id": names[i], "content": f"text {i}", "metadata": {"room": str(room[i])},
         "vector": vectors[group[i]].tolist()}
        for i in range(size)
    ])  # fmt: skip
    query = _unit(rng.standard_normal(DIMENSIONS))
    options: dict[str, Any] = {"top_k": top_k, "ranking": "semantic"}
    if filtered:
        options["filter"] = {"room": "a"}
    in_scope = [i for i in range(size) if not filtered or room[i] == "a"]
    score = {i: float(vectors[group[i]] @ query) for i in in_scope}
    want = [names[i] for i in sorted(in_scope, key=lambda i: (-score[i], names[i]))][:top_k]
    for _ in range(3):  # the SQL scope, then the scope copy (built on the third search)
        found = memory.search(namespace, query_vector=query.tolist(), **options)
        assert found.ids() == want
        scores = [h.score for h in found.hits]
        assert np.allclose(scores, [score[names.index(i)] for i in want], atol=1e-6)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(2, 30), top_k=st.integers(1, 8))
def test_different_vectors_of_one_cosine_tie_and_rank_by_id(
    memory: erstwhile.Memory, seed: int, size: int, top_k: int
) -> None:
    """Each vector is one base vector with its first components shuffled, and the
    query weighs those components alike: the same cosine, summed in another order, so
    float32 arithmetic (pgvector's, BLAS's) can put them an ulp apart either way. Small
    whole numbers, so that every shuffle has the same norm to the bit and is stored
    as an exact shuffle of the others."""
    rng = np.random.default_rng(seed)
    namespace = f"ns{next(_NAMESPACES)}"
    block = 12
    base = rng.integers(0, 4, DIMENSIONS).astype(np.float64)
    base[0] = 1.0  # never all zeros
    query = rng.integers(0, 3, DIMENSIONS).astype(np.float64)
    query[:block] = 1.0
    vectors = []
    for _ in range(size):
        vector = base.copy()
        vector[:block] = vector[rng.permutation(block)]
        vectors.append(vector)
    names = [f"r{i:03d}" for i in rng.permutation(size)]  # written out of id order
    memory.upsert(namespace, [
        {"id": names[i], "content": f"text {i}", "vector": vectors[i].tolist()}
        for i in range(size)
    ])  # fmt: skip
    want = sorted(names)[:top_k]  # one cosine: every record ties, and ranks by id
    for _ in range(3):  # the SQL scope, then the scope copy (built on the third search)
        found = memory.search(namespace, query_vector=query.tolist(), top_k=top_k,
                              ranking="semantic")  # fmt: skip
        assert found.ids() == want

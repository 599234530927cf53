"""Vectors a caller brings need no embedder (as in the earlier API: embed offline,
store and search here). In a namespace without one, records written with vectors
and searched with a ``query_vector`` rank by exact cosine, on both backends, against
a brute-force oracle; each vector size is its own space; text still searches
lexically; a bad vector is refused by name and writes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.errors import InvalidInput, NotFound

component = st.integers(min_value=-4, max_value=4).map(float)


@pytest.fixture
def bare(store_target: str) -> Iterator[erstwhile.Memory]:
    m = erstwhile.open(store_target, embedder="none", background_jobs=False)
    yield m
    m.close()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    vectors=st.lists(st.lists(component, min_size=3, max_size=3).filter(any),
                     min_size=1, max_size=8),
    query=st.lists(component, min_size=3, max_size=3).filter(any),
)  # fmt: skip
def test_caller_vectors_rank_by_cosine_without_an_embedder(
    bare: erstwhile.Memory, vectors: list[list[float]], query: list[float]
) -> None:
    ns = f"cv-{uuid.uuid4().hex[:12]}"
    bare.upsert(ns, [{"id": f"r{i}", "content": f"note {i}", "vector": v}
                     for i, v in enumerate(vectors)])  # fmt: skip
    found = bare.search(ns, query_vector=query, top_k=50, include_vector=True)
    unit = np.asarray(query) / np.linalg.norm(query)
    cosines = {f"r{i}": float(np.dot(np.asarray(v) / np.linalg.norm(v), unit))
               for i, v in enumerate(vectors)}  # fmt: skip
    assert sorted(h.record.id for h in found.hits) == sorted(cosines)
    for hit in found.hits:
        assert hit.score == pytest.approx(cosines[hit.record.id], abs=1e-5)
        assert hit.record.vector is not None and len(hit.record.vector) == 3
    scores = [h.score for h in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert found.ranking == "semantic" and found.unembedded == 0


def test_sizes_are_separate_spaces_and_text_stays_lexical(bare: erstwhile.Memory) -> None:
    ns = "spaces"
    bare.upsert(ns, [{"id": "three", "content": "alpha", "vector": [1, 0, 0]}])
    bare.upsert(ns, [{"id": "four", "content": "beta", "vector": [1, 0, 0, 0]},
                     {"id": "plain", "content": "alpha beta"}])  # fmt: skip
    bare.set_embedding(ns, "plain", [0, 1, 0])
    three = bare.search(ns, query_vector=[2, 1, 0])
    assert [h.record.id for h in three.hits] == ["three", "plain"]
    assert [h.record.id for h in bare.search(ns, query_vector=[0, 0, 0, 1]).hits] == ["four"]
    assert bare.search(ns, query_vector=[0, 0, 0, 1]).unembedded == 2  # no 4-d vector
    lexical = bare.search(ns, "alpha")
    assert lexical.ranking == "lexical" and {h.record.id for h in lexical.hits} == {
        "three", "plain",
    }  # fmt: skip
    with pytest.raises(InvalidInput, match=r"records\[1\]\.vector"):
        bare.upsert(ns, [{"id": "x", "content": "x", "vector": [1, 0, 0]},
                         {"id": "y", "content": "y", "vector": [1, 0]}])  # fmt: skip
    with pytest.raises(NotFound):
        bare.get(ns, "x")  # nothing of the refused batch was written
    with pytest.raises(InvalidInput, match="query_vector"):
        bare.search(ns, query_vector=[0, 0, 0])

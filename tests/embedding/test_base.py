"""The pipeline every provider shares: batching, truncation, checks, normalisation."""

from __future__ import annotations

import numpy as np
import pytest

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import Embedder

from .fakes import CountingEmbedder


class Scripted(Embedder):
    """Returns whatever the test sets in ``answer``."""

    provider = "scripted"

    def __init__(self, answer: object, dimensions: int = 3) -> None:
        super().__init__(model="m", dimensions=dimensions)
        self.answer = answer

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self.answer  # type: ignore[return-value]


def test_batching_is_done_once_in_the_base() -> None:
    e = CountingEmbedder(batch_size=3)
    texts = [f"t{i}" for i in range(7)]
    vectors = e.embed_documents(texts)
    assert [len(c) for c in e.calls] == [3, 3, 1]
    assert e.embedded == texts
    np.testing.assert_array_equal(vectors[4], CountingEmbedder().embed_query("t4"))


def test_texts_are_truncated_to_max_chars() -> None:
    e = CountingEmbedder(max_chars=3)
    e.embed_documents(["abcdef"])
    e.embed_query("uvwxyz")
    assert e.embedded == ["abc", "uvw"]
    assert CountingEmbedder().max_chars == 8000


def test_rows_are_normalised_float32() -> None:
    vectors = Scripted([[3.0, 4.0, 0.0]]).embed_documents(["x"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0]], rtol=1e-6)
    query = Scripted(np.array([[0.0, 0.0, 2.0]], dtype=np.float64)).embed_query("x")
    assert query.dtype == np.float32 and query.shape == (3,)


def test_empty_input_makes_no_call() -> None:
    e = CountingEmbedder()
    assert e.embed_documents([]).shape == (0, 16)
    assert e.calls == []


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ([[1.0, 0.0, 0.0]] * 2, "2 vectors for 1 texts"),
        ([1.0, 0.0, 0.0], r"array of shape \(3,\)"),
        ([[1.0, 0.0]], "dimension 2, configured 3"),
        ([[float("nan"), 1.0, 0.0]], "NaN"),
        ([[0.0, 0.0, 0.0]], "all-zero"),
        ([["a", "b", "c"]], "not a matrix of numbers"),
    ],
)
def test_bad_provider_answers_are_provider_failed(answer: object, match: str) -> None:
    with pytest.raises(ProviderFailed, match=match):
        Scripted(answer).embed_documents(["x"])


def test_bad_arguments_are_invalid_input() -> None:
    e = CountingEmbedder()
    with pytest.raises(InvalidInput, match="not a single string"):
        e.embed_documents("a whole string")
    with pytest.raises(InvalidInput, match=r"texts\[1\]"):
        e.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="batch_size"):
        CountingEmbedder(batch_size=0)


def test_repr_names_only_the_identity() -> None:
    assert repr(CountingEmbedder()) == "CountingEmbedder(embedder_id='counting:feature-hash-v2:16')"

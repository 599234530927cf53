from __future__ import annotations

import numpy as np
import pytest

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import OllamaEmbedder

from .fake_server import FakeServer, Received, ollama_reply, reference_vectors

TEXTS = ["the cat sat on the mat", "quarterly revenue grew"]


def embedder(server: FakeServer, **options: object) -> OllamaEmbedder:
    defaults: dict[str, object] = {
        "model": "tiny-embed",
        "dimensions": 8,
        "base_url": server.url,
        "backoff_base": 0.001,
        "max_attempts": 3,
    }
    defaults.update(options)
    return OllamaEmbedder(**defaults)  # type: ignore[arg-type]


def test_embed_protocol(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, ollama_reply(req))
    with embedder(server) as e:
        vectors = e.embed_documents(TEXTS)
    (request,) = server.requests
    assert request.path == "/api/embed"
    assert request.body == {"model": "tiny-embed", "input": TEXTS, "truncate": True}
    reference = reference_vectors(TEXTS, 8)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, reference, rtol=1e-6)
    assert e.embedder_id == "ollama:tiny-embed:8"


def test_429_then_200(server: FakeServer) -> None:
    def respond(req: Received, n: int) -> tuple[int, dict[str, str], object]:
        if n == 1:
            return 429, {"Retry-After": "0"}, {"error": "busy"}
        return 200, {}, ollama_reply(req)

    server.respond = respond
    with embedder(server) as e:
        assert e.embed_query("hello").shape == (8,)
    assert len(server.requests) == 2


def test_503_forever_is_provider_failed(server: FakeServer) -> None:
    server.respond = lambda req, n: (503, {}, {"error": "loading model"})
    with embedder(server) as e, pytest.raises(ProviderFailed, match="gave up after 3 attempts"):
        e.embed_documents(TEXTS)
    assert len(server.requests) == 3


def test_missing_model_is_reported_without_retry(server: FakeServer) -> None:
    server.respond = lambda req, n: (404, {}, {"error": "model 'tiny-embed' not found"})
    with embedder(server) as e, pytest.raises(ProviderFailed, match=r"HTTP 404.*not found"):
        e.embed_documents(TEXTS)
    assert len(server.requests) == 1


def test_wrong_dimension_names_the_fix(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, ollama_reply(req, dimensions=5))
    with embedder(server) as e, pytest.raises(ProviderFailed, match="dimensions = 5"):
        e.embed_documents(TEXTS)


def test_wrong_count_is_provider_failed(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, {"embeddings": [[1.0] * 8]})
    with embedder(server) as e, pytest.raises(ProviderFailed, match="1 vectors for 2 texts"):
        e.embed_documents(TEXTS)


def test_known_models_need_no_dimensions() -> None:
    assert OllamaEmbedder(model="nomic-embed-text:latest").dimensions == 768
    with pytest.raises(InvalidInput, match=r"embedding\.dimensions is required"):
        OllamaEmbedder(model="something-else")

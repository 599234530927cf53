from __future__ import annotations

import base64
import socket

import numpy as np
import pytest

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.domain.secrets import Secret
from erstwhile.embedding import OpenAIEmbedder
from erstwhile.embedding.config import EmbedderConfig

from .fake_server import FakeServer, Received, openai_reply, reference_vectors

TEXTS = ["the cat sat on the mat", "quarterly revenue grew", "a dog barked"]


def embedder(server: FakeServer, **options: object) -> OpenAIEmbedder:
    defaults: dict[str, object] = {
        "model": "test-embed",
        "dimensions": 8,
        "base_url": server.url + "/v1",
        "backoff_base": 0.001,
        "max_attempts": 3,
    }
    defaults.update(options)
    return OpenAIEmbedder(**defaults)  # type: ignore[arg-type]


def expected(texts: list[str], dimensions: int = 8) -> np.ndarray:
    vectors = reference_vectors(texts, dimensions)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_float_reply(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server) as e:
        vectors = e.embed_documents(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    (request,) = server.requests
    assert request.path == "/v1/embeddings"
    assert request.body == {
        "input": TEXTS,
        "model": "test-embed",
        "encoding_format": "float",
        "dimensions": 8,
    }


def _base64_reply(req: Received, n: int) -> tuple[int, dict[str, str], object]:
    reply = openai_reply(req)
    for item in reply["data"]:
        raw = np.asarray(item["embedding"], dtype="<f4").tobytes()
        item["embedding"] = base64.b64encode(raw).decode()
    return 200, {}, reply


def test_base64_reply_when_asked_for(server: FakeServer) -> None:
    server.respond = _base64_reply
    with embedder(server, encoding_format="base64") as e:
        vectors = e.embed_documents(TEXTS)
    assert server.requests[0].body["encoding_format"] == "base64"
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-6)


def test_base64_reply_decoded_even_when_float_was_asked(server: FakeServer) -> None:
    server.respond = _base64_reply
    with embedder(server) as e:
        np.testing.assert_allclose(e.embed_documents(TEXTS), expected(TEXTS), rtol=1e-6)


def test_429_then_200_retries_once(server: FakeServer) -> None:
    def respond(req: Received, n: int) -> tuple[int, dict[str, str], object]:
        if n == 1:
            return 429, {"Retry-After": "0"}, {"error": {"message": "slow down"}}
        return 200, {}, openai_reply(req)

    server.respond = respond
    with embedder(server) as e:
        vectors = e.embed_documents(TEXTS)
    assert len(server.requests) == 2
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-6)


def test_500_forever_gives_up_after_bounded_attempts(server: FakeServer) -> None:
    server.respond = lambda req, n: (500, {}, {"error": "model crashed"})
    with embedder(server, max_attempts=3) as e, pytest.raises(ProviderFailed) as info:
        e.embed_documents(TEXTS)
    assert len(server.requests) == 3
    message = str(info.value)
    assert "gave up after 3 attempts" in message
    assert "HTTP 500" in message and "model crashed" in message
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_client_error_is_not_retried(server: FakeServer) -> None:
    server.respond = lambda req, n: (400, {}, {"error": {"message": "bad model"}})
    with embedder(server) as e, pytest.raises(ProviderFailed, match=r"HTTP 400.*bad model"):
        e.embed_documents(TEXTS)
    assert len(server.requests) == 1


def test_long_retry_after_fails_fast(server: FakeServer) -> None:
    server.respond = lambda req, n: (429, {"Retry-After": "3600"}, {"error": "quota"})
    with embedder(server) as e, pytest.raises(ProviderFailed, match="wait 3600 s"):
        e.embed_documents(TEXTS)
    assert len(server.requests) == 1


def test_connect_error_is_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port is closed again, so every connection is refused.
    e = OpenAIEmbedder(
        model="m", dimensions=8, base_url=f"http://127.0.0.1:{port}", backoff_base=0.001
    )
    with e, pytest.raises(ProviderFailed, match="gave up after 4 attempts: ConnectError"):
        e.embed_documents(["x"])


def test_dimensions_passed_through(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server, model="text-embedding-3-small", dimensions=64) as e:
        vectors = e.embed_documents(TEXTS)
        assert e.embedder_id == "openai:text-embedding-3-small:64"
    assert server.requests[0].body["dimensions"] == 64
    assert vectors.shape == (3, 64)


def test_known_model_needs_no_dimensions_and_sends_none(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req, dimensions=1536))
    with embedder(server, model="text-embedding-3-small", dimensions=None) as e:
        assert e.dimensions == 1536
        assert e.embed_documents(["x"]).shape == (1, 1536)
    assert "dimensions" not in server.requests[0].body


def test_unknown_model_without_dimensions_is_invalid(server: FakeServer) -> None:
    with pytest.raises(InvalidInput, match=r"embedding\.dimensions is required"):
        embedder(server, model="my-own-model", dimensions=None)


def test_results_sorted_by_index(server: FakeServer) -> None:
    def shuffled(req: Received, n: int) -> tuple[int, dict[str, str], object]:
        reply = openai_reply(req)
        reply["data"] = [reply["data"][i] for i in (2, 0, 1)]
        return 200, {}, reply

    server.respond = shuffled
    with embedder(server) as e:
        np.testing.assert_allclose(e.embed_documents(TEXTS), expected(TEXTS), rtol=1e-6)


def test_authorization_header_is_the_key(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server, api_key=Secret("sk-test-123")) as e:
        e.embed_documents(["x"])
    assert server.requests[0].headers["Authorization"] == "Bearer sk-test-123"


def test_no_key_no_authorization_header(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server) as e:
        e.embed_documents(["x"])
    assert "Authorization" not in server.requests[0].headers


def test_batches_share_one_pooled_connection(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    texts = [f"text number {i}" for i in range(7)]
    with embedder(server, batch_size=3) as e:
        vectors = e.embed_documents(texts)
    assert [len(r.body["input"]) for r in server.requests] == [3, 3, 1]
    assert len({r.client_port for r in server.requests}) == 1
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)


def test_texts_truncated_to_max_chars(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server, max_chars=5) as e:
        e.embed_documents(["abcdefghij"])
    assert server.requests[0].body["input"] == ["abcde"]


def test_embed_query_returns_one_vector(server: FakeServer) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    with embedder(server) as e:
        vector = e.embed_query("where is the cat")
    assert vector.shape == (8,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        ({"nothing": []}, "no 'data' list"),
        ({"data": [{"index": 0}]}, "needs an 'index' and an 'embedding'"),
        ({"data": [{"index": 5, "embedding": [1.0] * 8}]}, "indexes are"),
        ({"data": [{"index": 0, "embedding": [1.0] * 7}]}, "dimension 7, configured 8"),
        ("not json at all", "not JSON"),
    ],
)
def test_malformed_replies_fail_clearly(server: FakeServer, reply: object, match: str) -> None:
    server.respond = lambda req, n: (200, {}, reply)
    with embedder(server) as e, pytest.raises(ProviderFailed, match=match):
        e.embed_documents(["one text"])


def test_bad_base_url_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="base_url"):
        OpenAIEmbedder(model="m", dimensions=8, base_url="ftp://example.invalid")


def from_config(server: FakeServer, **options: object) -> OpenAIEmbedder:
    config = EmbedderConfig(provider="openai", model="test-embed", dimensions=8,
                            base_url=server.url + "/v1", **options)  # type: ignore[arg-type]  # fmt: skip
    return OpenAIEmbedder.from_config(config, frozenset())


def test_the_key_defaults_to_openai_api_key(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-default")
    with from_config(server) as e:
        e.embed_documents(["x"])
    assert server.requests[-1].headers["Authorization"] == "Bearer sk-from-default"
    # a configured variable wins over the default one
    monkeypatch.setenv("ERSTWHILE_TEST_OTHER_KEY", "sk-configured")
    with from_config(server, api_key_env="ERSTWHILE_TEST_OTHER_KEY") as e:
        e.embed_documents(["x"])
    assert server.requests[-1].headers["Authorization"] == "Bearer sk-configured"


def test_without_openai_api_key_no_key_is_sent(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with from_config(server) as e:  # an OpenAI-compatible local server: no key needed
        e.embed_documents(["x"])
    assert "Authorization" not in server.requests[-1].headers
    # a variable named in config must be set
    with pytest.raises(InvalidInput, match="ERSTWHILE_TEST_UNSET_KEY, which is not set"):
        from_config(server, api_key_env="ERSTWHILE_TEST_UNSET_KEY")

"""OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, vLLM, llama.cpp, LM Studio…).

Request: ``{"input": [...], "model": ..., "encoding_format": "float"|"base64"}`` plus
``dimensions`` when configured. Reply: ``{"data": [{"index": i, "embedding": ...}]}``
where an embedding is a list of floats or, in base64 form, little-endian float32
bytes. ``data`` is put back in input order by ``index``: servers may reorder it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

import httpx
import numpy as np

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.domain.secrets import Secret
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS
from erstwhile.embedding.http import HttpEmbedder


class OpenAIEmbedder(HttpEmbedder):
    """Embeds through an OpenAI-compatible server; ``dimensions`` is sent when given."""

    provider = "openai"
    DEFAULT_BASE_URL = "https://api.openai.com/v1"
    DEFAULT_MODEL = "text-embedding-3-small"
    DEFAULT_KEY_ENV = "OPENAI_API_KEY"
    KNOWN_DIMENSIONS: ClassVar[dict[str, int]] = {
        "text-embedding-3-small": 1536,
        "text-embedding-3-large": 3072,
        "text-embedding-ada-002": 1536,
    }

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        base_url: str = DEFAULT_BASE_URL,
        api_key: Secret | None = None,
        encoding_format: Literal["float", "base64"] = "float",
        timeout: float = 30.0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            model=model, dimensions=dimensions, base_url=base_url, api_key=api_key,
            timeout=timeout, batch_size=batch_size, max_chars=max_chars,
            max_attempts=max_attempts, backoff_base=backoff_base, transport=transport,
        )  # fmt: skip
        if encoding_format not in ("float", "base64"):
            self.close()
            raise InvalidInput("encoding_format must be 'float' or 'base64'")
        self._send_dimensions = dimensions
        self._encoding_format = encoding_format

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        payload: dict[str, Any] = {
            "input": texts,
            "model": self.model,
            "encoding_format": self._encoding_format,
        }
        if self._send_dimensions is not None:
            payload["dimensions"] = self._send_dimensions
        reply = self._http.post_json("/embeddings", payload)
        return self._parse(reply, len(texts))

    def _parse(self, reply: Any, expected: int) -> np.ndarray:
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            raise ProviderFailed(f"{self.embedder_id}: the reply has no 'data' list")
        try:
            items = sorted(data, key=lambda item: int(item["index"]))
            indexes = [int(item["index"]) for item in items]
            rows = [_vector(item["embedding"]) for item in items]
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise ProviderFailed(
                f"{self.embedder_id}: each item of 'data' needs an 'index' and an 'embedding' "
                "that is a list of numbers or base64 float32"
            ) from None
        if indexes != list(range(expected)):
            raise ProviderFailed(
                f"{self.embedder_id}: the reply's indexes are {_summary(indexes)}, "
                f"expected 0..{expected - 1}"
            )
        if len({row.shape[0] for row in rows}) > 1:
            raise ProviderFailed(f"{self.embedder_id}: the reply mixes vector sizes")
        return np.stack(rows) if rows else np.empty((0, self.dimensions), np.float32)


def _vector(embedding: object) -> np.ndarray:
    if isinstance(embedding, str):
        raw = base64.b64decode(embedding, validate=True)
        if len(raw) % 4:
            raise ValueError("base64 embedding is not a whole number of float32 values")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not isinstance(embedding, list):
        raise TypeError("embedding must be a list or a base64 string")
    return np.asarray(embedding, dtype=np.float32)


def _summary(indexes: Iterable[int]) -> str:
    shown = list(indexes)
    return str(shown) if len(shown) <= 10 else f"{shown[:10]}…"


from_config = OpenAIEmbedder.from_config

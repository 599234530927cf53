"""Ollama ``POST {base_url}/api/embed``: ``{"model", "input": [...], "truncate": true}``.

The reply is ``{"embeddings": [[...], ...]}`` in input order. ``truncate`` lets the
server cut a text to the model's context instead of refusing it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
import numpy as np

from erstwhile.domain.errors import ProviderFailed
from erstwhile.domain.secrets import Secret
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS
from erstwhile.embedding.http import HttpEmbedder


class OllamaEmbedder(HttpEmbedder):
    """Embeds through an Ollama server (no key needed; one is sent if configured)."""

    provider = "ollama"
    DEFAULT_BASE_URL = "http://127.0.0.1:11434"
    DEFAULT_MODEL = "nomic-embed-text"
    KNOWN_DIMENSIONS: ClassVar[dict[str, int]] = {
        "nomic-embed-text": 768,
        "mxbai-embed-large": 1024,
        "all-minilm": 384,
        "bge-m3": 1024,
        "snowflake-arctic-embed": 1024,
    }
    MODEL_LABEL = "Ollama model"

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        base_url: str = DEFAULT_BASE_URL,
        api_key: Secret | None = None,
        timeout: float = 60.0,
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

    @classmethod
    def known_size(cls, model: str) -> int | None:
        return cls.KNOWN_DIMENSIONS.get(model.removesuffix(":latest"))

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "truncate": True}
        reply = self._http.post_json("/api/embed", payload)
        embeddings = reply.get("embeddings") if isinstance(reply, dict) else None
        if not isinstance(embeddings, list):
            raise ProviderFailed(f"{self.embedder_id}: the reply has no 'embeddings' list")
        if not embeddings:
            return np.empty((0, self.dimensions), dtype=np.float32)  # the count check reports it
        try:
            return np.asarray(embeddings, dtype=np.float32).reshape(len(embeddings), -1)
        except (TypeError, ValueError):
            raise ProviderFailed(
                f"{self.embedder_id}: 'embeddings' must be a list of equal-length number lists"
            ) from None


from_config = OllamaEmbedder.from_config

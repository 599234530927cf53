"""Ollama ``POST {base_url}/api/embed``: ``{"model", "input": [...], "truncate": true}``.

The reply is ``{"embeddings": [[...], ...]}`` in input order. ``truncate`` lets the
server cut a text to the model's context instead of refusing it.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from memstrata.domain.errors import InvalidInput, ProviderFailed
from memstrata.domain.secrets import Secret
from memstrata.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS, Embedder
from memstrata.embedding.config import EmbedderConfig, secret_from_env
from memstrata.embedding.http import HttpClient

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "nomic-embed-text"

# Native sizes of common embedding models, so these need no ``dimensions``.
KNOWN_DIMENSIONS = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
    "snowflake-arctic-embed": 1024,
}


class OllamaEmbedder(Embedder):
    """Embeds through an Ollama server (no key needed; one is sent if configured)."""

    provider = "ollama"

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
        size = dimensions or KNOWN_DIMENSIONS.get(model.removesuffix(":latest"))
        if size is None:
            raise InvalidInput(
                f"embedding.dimensions is required for Ollama model {model!r}: "
                "set it to the size of the vectors the model returns"
            )
        super().__init__(model=model, dimensions=size, batch_size=batch_size, max_chars=max_chars)
        self._http = HttpClient(
            name=self.embedder_id,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            transport=transport,
        )

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

    def close(self) -> None:
        self._http.close()


def from_config(config: EmbedderConfig, secret_env: frozenset[str]) -> OllamaEmbedder:
    return OllamaEmbedder(
        model=config.model or DEFAULT_MODEL,
        dimensions=config.dimensions,
        base_url=config.base_url or DEFAULT_BASE_URL,
        api_key=secret_from_env(config.api_key_env),
        timeout=config.timeout,
        batch_size=config.batch_size or DEFAULT_BATCH_SIZE,
        max_chars=config.max_chars,
        max_attempts=config.max_attempts,
        backoff_base=config.backoff_base,
    )

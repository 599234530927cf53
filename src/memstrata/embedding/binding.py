"""Which embedder serves which namespace: the binding the service consults."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from memstrata.domain.errors import InvalidInput
from memstrata.domain.validation import parse_model
from memstrata.embedding.base import Embedder
from memstrata.embedding.cache import CachedEmbedder, EmbeddingCache
from memstrata.embedding.config import EmbedderConfig
from memstrata.embedding.registry import make_embedder

EmbedderSpec = Embedder | EmbedderConfig | Mapping[str, Any] | str | None


def build_embedder(spec: EmbedderSpec, cache_size: int = 0) -> Embedder | None:
    """An embedder from a spec: an instance, a config (or its dict), a provider name,
    ``"none"`` for no embedder, or ``None`` for the best one available offline
    (``MEMSTRATA_EMBEDDER`` names a provider to use instead)."""
    if spec is None:
        spec = os.environ.get("MEMSTRATA_EMBEDDER") or "auto"
    if isinstance(spec, Embedder):
        return spec
    if isinstance(spec, str):
        if spec.strip().lower() == "none":
            return None
        spec = EmbedderConfig(provider=spec)
    config = parse_model(EmbedderConfig, spec, "embedding")
    cache = EmbeddingCache(cache_size)
    return make_embedder(config, cache=cache if cache.enabled else None)


class EmbedderBinding:
    """A default embedder plus per-namespace overrides; ``None`` means no embedder."""

    def __init__(
        self, default: Embedder | None, overrides: Mapping[str, Embedder | None] | None = None
    ) -> None:
        self.default = default
        self.overrides = dict(overrides or {})
        self._lock = threading.Lock()

    def for_namespace(self, namespace: str) -> Embedder | None:
        return self.overrides.get(namespace, self.default)

    def describe(self, namespace: str) -> str:
        embedder = self.for_namespace(namespace)
        return embedder.embedder_id if embedder is not None else "none"

    def caches(self) -> list[EmbeddingCache]:
        found = []
        for embedder in [self.default, *self.overrides.values()]:
            if isinstance(embedder, CachedEmbedder) and embedder.cache not in found:
                found.append(embedder.cache)
        return found

    def close(self) -> None:
        for embedder in {id(e): e for e in [self.default, *self.overrides.values()] if e}.values():
            embedder.close()


def check_dimensions(embedder: Embedder, vector: list[float], field: str) -> None:
    if len(vector) != embedder.dimensions:
        raise InvalidInput(
            f"{field} has {len(vector)} dimensions but the namespace embedder "
            f"{embedder.embedder_id} makes {embedder.dimensions}; send a vector of that size"
        )

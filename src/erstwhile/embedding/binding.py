"""Which embedder serves which namespace: the binding the service consults."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from erstwhile.domain.validation import parse_model
from erstwhile.domain.vectors import checked_vector
from erstwhile.embedding.base import Embedder
from erstwhile.embedding.cache import CachedEmbedder, EmbeddingCache
from erstwhile.embedding.config import EmbedderConfig
from erstwhile.embedding.registry import make_embedder

EmbedderSpec = Embedder | EmbedderConfig | Mapping[str, Any] | str | None


def build_embedder(spec: EmbedderSpec, cache_size: int = 0) -> Embedder | None:
    """An embedder from a spec: an instance, a config (or its dict), a provider name,
    ``"none"`` for no embedder, or ``None`` for the best one available offline
    (``ERSTWHILE_EMBEDDER`` names a provider to use instead)."""
    if spec is None:
        spec = os.environ.get("ERSTWHILE_EMBEDDER") or "auto"
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
    """A default embedder plus per-namespace overrides; ``None`` means no embedder.

    Each namespace gets its own embedding cache (SPEC §5), made on first use, even
    where namespaces share a provider: one namespace's texts never evict another's,
    and whether a text is cached says nothing about what other namespaces embedded."""

    def __init__(
        self, default: Embedder | None, overrides: Mapping[str, Embedder | None] | None = None
    ) -> None:
        self.default = default
        self.overrides = dict(overrides or {})
        self._lock = threading.Lock()
        self._per_namespace: dict[str, CachedEmbedder] = {}

    def for_namespace(self, namespace: str) -> Embedder | None:
        embedder = self.overrides.get(namespace, self.default)
        if not isinstance(embedder, CachedEmbedder):
            return embedder
        with self._lock:
            own = self._per_namespace.get(namespace)
            if own is None:
                own = self._per_namespace[namespace] = embedder.with_own_cache()
            return own

    def describe(self, namespace: str) -> str:
        embedder = self.for_namespace(namespace)
        return embedder.embedder_id if embedder is not None else "none"

    def caches(self) -> list[EmbeddingCache]:
        """Every namespace's cache in use (for the hit and miss metrics)."""
        with self._lock:
            return [embedder.cache for embedder in self._per_namespace.values()]

    def close(self) -> None:
        for embedder in {id(e): e for e in [self.default, *self.overrides.values()] if e}.values():
            embedder.close()


def check_dimensions(embedder: Embedder, vector: Sequence[float], field: str) -> np.ndarray:
    """``vector`` checked for ``embedder`` (its size, finite as float32, not all zeros),
    as the unit float32 vector the store keeps."""
    return checked_vector(vector, field, embedder.dimensions)

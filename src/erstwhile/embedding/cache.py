"""A bounded LRU of vectors, and an embedder that consults it before its provider.

Keys are ``(embedder_id, text, query)``: the id keeps vectors of different models
apart (they are not comparable), the flag keeps query and document vectors apart
(models may prefix them differently), and the text is the truncated text the
provider would see, so two contents that agree on their first ``max_chars`` share
one entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from erstwhile.embedding.base import Embedder, check_texts

DEFAULT_CACHE_SIZE = 4096

CacheKey = tuple[str, str, bool]


class EmbeddingCache:
    """Thread-safe LRU. ``max_entries``: 0 means the default (4,096), negative turns it off.

    ``hits`` and ``misses`` count texts: a miss is a text the provider had to embed,
    a hit one it did not (including a repeat of a text earlier in the same batch).
    """

    def __init__(self, max_entries: int = 0) -> None:
        self.capacity = DEFAULT_CACHE_SIZE if max_entries == 0 else max(max_entries, 0)
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[CacheKey, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def get(self, key: CacheKey) -> np.ndarray | None:
        """The cached vector (read-only) or None; does not touch the counters."""
        with self._lock:
            vector = self._entries.get(key)
            if vector is not None:
                self._entries.move_to_end(key)
            return vector

    def put(self, key: CacheKey, vector: np.ndarray) -> None:
        if not self.enabled:
            return
        stored = np.array(vector, dtype=np.float32, copy=True)
        # Read-only so that no caller can corrupt what later callers are served.
        stored.setflags(write=False)
        with self._lock:
            self._entries[key] = stored
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def record(self, *, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def clear(self) -> None:
        """Drop every entry; the counters keep counting (they are metrics)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"EmbeddingCache(capacity={self.capacity}, size={len(self)}, "
            f"hits={self.hits}, misses={self.misses})"
        )


class CachedEmbedder(Embedder):
    """Wraps an embedder; same identity, but known texts are served from ``cache``.

    The misses of one call are de-duplicated and handed to the inner embedder in a
    single call (which batches them as usual). Two threads missing the same text at
    the same moment may both embed it; the result is identical, so that is harmless.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        super().__init__(
            model=inner.model,
            dimensions=inner.dimensions,
            batch_size=inner.batch_size,
            max_chars=inner.max_chars,
        )
        self.provider = inner.provider
        self.inner = inner
        self.cache = cache

    def truncate(self, text: str) -> str:
        return self.inner.truncate(text)

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self.inner._embed_batch(texts, query=query)

    def _embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        items = [self.truncate(t) for t in check_texts(texts)]
        embedder_id = self.embedder_id
        out = np.empty((len(items), self.dimensions), dtype=np.float32)
        pending: dict[str, list[int]] = {}  # text -> rows waiting for it, in first-seen order
        for row, text in enumerate(items):
            cached = self.cache.get((embedder_id, text, query))
            if cached is not None:
                out[row] = cached
            else:
                pending.setdefault(text, []).append(row)
        if pending:
            misses = list(pending)
            vectors = self.inner._embed(misses, query=query)
            for text, vector in zip(misses, vectors, strict=True):
                self.cache.put((embedder_id, text, query), vector)
                out[pending[text]] = vector
        self.cache.record(hits=len(items) - len(pending), misses=len(pending))
        return out

    def with_own_cache(self) -> CachedEmbedder:
        """The same provider behind a new, empty cache of the same size."""
        return CachedEmbedder(self.inner, EmbeddingCache(self.cache.capacity))

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {self.cache!r})"

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import erstwhile
from erstwhile.embedding import (
    CachedEmbedder,
    EmbedderConfig,
    EmbeddingCache,
    HashEmbedder,
    make_embedder,
)

from .fakes import CountingEmbedder


def cached(size: int = 0, **options: int) -> tuple[CachedEmbedder, CountingEmbedder]:
    inner = CountingEmbedder(**options)
    return CachedEmbedder(inner, EmbeddingCache(size)), inner


def test_hits_and_misses_are_counted() -> None:
    e, inner = cached()
    first = e.embed_documents(["alpha", "beta"])
    assert (e.cache.hits, e.cache.misses) == (0, 2)
    second = e.embed_documents(["beta", "alpha", "gamma"])
    assert (e.cache.hits, e.cache.misses) == (2, 3)
    assert inner.calls == [["alpha", "beta"], ["gamma"]]
    np.testing.assert_array_equal(second[:2], first[::-1])
    np.testing.assert_array_equal(
        second, CountingEmbedder().embed_documents(["beta", "alpha", "gamma"])
    )


def test_identical_texts_in_one_batch_are_embedded_once() -> None:
    e, inner = cached()
    vectors = e.embed_documents(["same", "other", "same", "same"])
    assert inner.calls == [["same", "other"]]
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[0], vectors[3])
    assert (e.cache.hits, e.cache.misses) == (2, 2)


def test_misses_go_to_the_provider_in_one_batched_call() -> None:
    e, inner = cached(batch_size=2)
    e.embed_documents(["a"])
    e.embed_documents(["a", "b", "c", "d"])
    assert inner.calls == [["a"], ["b", "c"], ["d"]]  # the inner embedder still batches


def test_query_and_document_vectors_are_kept_apart() -> None:
    e, inner = cached()
    e.embed_documents(["hello"])
    e.embed_query("hello")
    e.embed_query("hello")
    assert inner.embedded == ["hello", "hello"]
    assert (e.cache.hits, e.cache.misses) == (1, 2)


def test_identity_is_the_inner_embedders() -> None:
    e, inner = cached()
    assert e.embedder_id == inner.embedder_id == "counting:feature-hash-v2:16"
    assert (e.provider, e.model, e.dimensions) == ("counting", "feature-hash-v2", 16)


def test_lru_eviction_keeps_the_bound_and_the_recently_used() -> None:
    e, inner = cached(size=2)
    e.embed_documents(["a", "b"])
    e.embed_documents(["a"])  # touch a: b is now the least recently used
    e.embed_documents(["c"])
    assert len(e.cache) == 2
    inner.calls.clear()
    e.embed_documents(["a", "c"])
    assert inner.calls == []
    e.embed_documents(["b"])
    assert inner.calls == [["b"]]
    assert len(e.cache) == 2


def test_size_zero_means_default_and_negative_means_off() -> None:
    assert EmbeddingCache(0).capacity == 4096
    assert EmbeddingCache(10).capacity == 10
    off = EmbeddingCache(-1)
    assert not off.enabled
    e, inner = cached(size=-1)
    e.embed_documents(["x"])
    e.embed_documents(["x"])
    assert inner.calls == [["x"], ["x"]]
    assert len(e.cache) == 0
    assert e.cache.hits == 0


def test_key_is_the_truncated_text() -> None:
    e, inner = cached(max_chars=4)
    e.embed_documents(["abcdXXX", "abcdYYY"])
    assert inner.calls == [["abcd"]]


def test_cached_vectors_cannot_be_corrupted_by_callers() -> None:
    e, _ = cached()
    first = e.embed_documents(["x"])
    first[0, :] = 0.0
    again = e.embed_documents(["x"])
    assert np.linalg.norm(again[0]) == pytest.approx(1.0)


def test_same_cache_shared_by_two_embedders_keeps_them_apart() -> None:
    cache = EmbeddingCache()
    small = CachedEmbedder(HashEmbedder(8), cache)
    large = CachedEmbedder(HashEmbedder(32), cache)
    assert small.embed_documents(["t"]).shape == (1, 8)
    assert large.embed_documents(["t"]).shape == (1, 32)
    assert cache.misses == 2 and len(cache) == 2


def test_concurrent_use_is_safe_and_bounded() -> None:
    e, _ = cached(size=50)
    reference = CountingEmbedder()
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(40):
                texts = [f"text {(seed * 7 + i + j) % 120}" for j in range(5)]
                np.testing.assert_array_equal(
                    e.embed_documents(texts), reference.embed_documents(texts)
                )
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(e.cache) <= 50
    assert e.cache.hits + e.cache.misses == 8 * 40 * 5


def test_make_embedder_wraps_with_a_cache() -> None:
    cache = EmbeddingCache()
    e = make_embedder(EmbedderConfig(provider="hash", dimensions=32), cache=cache)
    assert isinstance(e, CachedEmbedder) and e.cache is cache
    assert e.embedder_id == "hash:feature-hash-v2:32"
    e.embed_documents(["a", "a"])
    assert (cache.hits, cache.misses) == (1, 1)


def test_each_namespace_has_its_own_cache(tmp_path: Path) -> None:
    """SPEC §5: a bounded cache per namespace. The same text in a second namespace goes
    to the provider again; a repeat within a namespace does not; metrics sum them."""
    provider = CountingEmbedder(8)
    shared = CachedEmbedder(provider, EmbeddingCache(2))
    with erstwhile.open(tmp_path / "m.db", embedder=shared, background_jobs=False) as m:
        m.upsert("a", [{"content": "same text"}, {"content": "other text"}])
        m.upsert("b", [{"content": "same text"}])
        m.upsert("a", [{"content": "same text"}])  # a cached document vector
        assert provider.calls == [["same text", "other text"], ["same text"]]
        m.search("a", "same text", ranking="semantic")  # a query vector: its own key
        m.search("a", "same text", ranking="semantic")
        assert provider.embedded.count("same text") == 3
        caches = m.service.embedders.caches()
        assert len(caches) == 2 and all(cache.capacity == 2 for cache in caches)
        assert (sum(c.misses for c in caches), sum(c.hits for c in caches)) == (4, 2)
        assert len(shared.cache) == 0  # the template's own cache is never used

"""Deterministic feature hashing: a model-free embedder for tests and offline use.

Features are lower-cased word tokens and the character 3-grams of each word (with
``<``/``>`` marking word edges, so "car" and "cart" share "<ca" and "car" but not
"ar>"). Each feature lands in a bucket with a sign, both taken from a keyed BLAKE2b
digest — never Python's ``hash()``, which is salted per process and would give a
different vector on every run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from erstwhile.domain.errors import InvalidInput
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS, Embedder
from erstwhile.embedding.config import EmbedderConfig

_WORD = re.compile(r"\w+")
_WORD_WEIGHT = 1.0
_GRAM_WEIGHT = 0.5  # many grams per word; halved so whole words still dominate
_EMPTY_FEATURE = "e:"  # an empty text still gets a direction, so it can be normalised
MODEL = "feature-hash-v2"
_PERSON = b"erstwhile-fh-v2"  # domain-separates these digests; changing it changes the model


class HashEmbedder(Embedder):
    """Signed feature hashing into ``dimensions`` buckets, L2-normalised."""

    provider = "hash"

    def __init__(
        self,
        dimensions: int = 256,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        super().__init__(
            model=MODEL,
            dimensions=dimensions,
            batch_size=batch_size,
            max_chars=max_chars,
        )

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text):
                bucket, sign = _slot(feature, self.dimensions)
                out[row, bucket] += sign * weight
        return out


def _features(text: str) -> Iterator[tuple[str, float]]:
    empty = True
    for word in _WORD.findall(text.lower()):
        empty = False
        yield "w:" + word, _WORD_WEIGHT
        padded = f"<{word}>"
        for i in range(len(padded) - 2):
            yield "c:" + padded[i : i + 3], _GRAM_WEIGHT
    if empty:
        yield _EMPTY_FEATURE, _WORD_WEIGHT


@lru_cache(maxsize=65536)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
    value = int.from_bytes(digest, "little")
    # The low bits pick the bucket, the top bit the sign: independent enough that
    # collisions cancel out on average instead of piling up.
    return value % dimensions, (1.0 if value >> 63 == 0 else -1.0)


def from_config(config: EmbedderConfig, secret_env: frozenset[str]) -> HashEmbedder:
    if config.model not in (None, MODEL):
        raise InvalidInput(
            f"the hash provider's model is {MODEL!r}, not {config.model!r}: "
            "leave embedding.model unset"
        )
    return HashEmbedder(
        config.dimensions or 256,
        batch_size=config.batch_size or DEFAULT_BATCH_SIZE,
        max_chars=config.max_chars,
    )

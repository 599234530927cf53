"""A deterministic embedder that counts what reaches its provider."""

from __future__ import annotations

import numpy as np

from erstwhile.embedding import HashEmbedder


class CountingEmbedder(HashEmbedder):
    provider = "counting"

    def __init__(self, dimensions: int = 16, **options: int) -> None:
        super().__init__(dimensions, **options)
        self.calls: list[list[str]] = []

    @property
    def embedded(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        self.calls.append(list(texts))
        return super()._embed_batch(texts, query=query)

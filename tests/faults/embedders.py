"""Embedders the fault suite's processes share (the same model id in the worker and the
test, so vectors the killed worker stored count for the test's embedder)."""

from __future__ import annotations

import numpy as np

from erstwhile.embedding import Embedder


class SlowTwin(Embedder):
    """The embed worker's model id, without its delay."""

    provider = "test"

    def __init__(self) -> None:
        super().__init__(model="slow", dimensions=8, batch_size=3)

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        return np.arange(1, 9, dtype=np.float32)[None, :].repeat(len(texts), 0)

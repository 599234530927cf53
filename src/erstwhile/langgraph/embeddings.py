"""A LangChain ``Embeddings`` model as a erstwhile embedder, so the model an agent
already configured for LangGraph's index embeds erstwhile's records and queries."""

from __future__ import annotations

from typing import Any

import numpy as np
from langgraph.store.base.embed import ensure_embeddings

from erstwhile.embedding.base import Embedder


class LangChainEmbedder(Embedder):
    """``embeddings`` (a LangChain ``Embeddings``, a function of texts, or a
    ``"provider:model"`` string LangChain resolves) as the embedder
    ``langchain:MODEL:DIMS``; ``model`` defaults to the string or the class name.
    Pass it to ``erstwhile.open(..., embedder=…)``."""

    provider = "langchain"

    def __init__(self, embeddings: Any, dims: int, *, model: str | None = None) -> None:
        resolved = ensure_embeddings(embeddings)
        name = model or (embeddings if isinstance(embeddings, str) else None)
        super().__init__(model=name or type(resolved).__name__, dimensions=dims)
        self.embeddings = resolved

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        if query:
            rows = [self.embeddings.embed_query(text) for text in texts]
        else:
            rows = self.embeddings.embed_documents(texts)
        return np.asarray(rows, dtype=np.float32)

"""Embeddings: one ``Embedder`` protocol, one module per provider, and the cache.

Providers: ``hash`` (model-free, deterministic), ``local`` (all-MiniLM-L6-v2
in-process, optional extra), ``openai`` (any OpenAI-compatible server), ``ollama``,
``command`` (an operator's program). Build one with ``make_embedder(config)``.
"""

from typing import TYPE_CHECKING, Any

from memstrata.embedding.base import Embedder
from memstrata.embedding.cache import CachedEmbedder, EmbeddingCache
from memstrata.embedding.command import CommandEmbedder
from memstrata.embedding.config import EmbedderConfig
from memstrata.embedding.hash import HashEmbedder
from memstrata.embedding.local import LocalEmbedder, local_available
from memstrata.embedding.registry import PROVIDERS, default_embedder, make_embedder

if TYPE_CHECKING:
    from memstrata.embedding.ollama import OllamaEmbedder
    from memstrata.embedding.openai import OpenAIEmbedder

_HTTP_PROVIDERS = {"OllamaEmbedder": "ollama", "OpenAIEmbedder": "openai"}


def __getattr__(name: str) -> Any:
    # The HTTP providers bring httpx: imported when named, not with memstrata.
    module = _HTTP_PROVIDERS.get(name)
    if module is None:
        raise AttributeError(f"module 'memstrata.embedding' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"memstrata.embedding.{module}"), name)


__all__ = [
    "PROVIDERS",
    "CachedEmbedder",
    "CommandEmbedder",
    "Embedder",
    "EmbedderConfig",
    "EmbeddingCache",
    "HashEmbedder",
    "LocalEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "default_embedder",
    "local_available",
    "make_embedder",
]

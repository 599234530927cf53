"""Embeddings: one ``Embedder`` protocol, one module per provider, and the cache.

Providers: ``hash`` (model-free, deterministic), ``local`` (all-MiniLM-L6-v2
in-process, optional extra), ``openai`` (any OpenAI-compatible server), ``ollama``,
``command`` (an operator's program). Build one with ``make_embedder(config)``.
"""

from typing import TYPE_CHECKING, Any

from erstwhile.embedding.base import Embedder
from erstwhile.embedding.cache import CachedEmbedder, EmbeddingCache
from erstwhile.embedding.command import CommandEmbedder
from erstwhile.embedding.config import EmbedderConfig
from erstwhile.embedding.hash import HashEmbedder
from erstwhile.embedding.local import LocalEmbedder, local_available
from erstwhile.embedding.registry import PROVIDERS, default_embedder, make_embedder

if TYPE_CHECKING:
    from erstwhile.embedding.ollama import OllamaEmbedder
    from erstwhile.embedding.openai import OpenAIEmbedder

_HTTP_PROVIDERS = {"OllamaEmbedder": "ollama", "OpenAIEmbedder": "openai"}


def __getattr__(name: str) -> Any:
    # The HTTP providers bring httpx: imported when named, not with erstwhile.
    module = _HTTP_PROVIDERS.get(name)
    if module is None:
        raise AttributeError(f"module 'erstwhile.embedding' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"erstwhile.embedding.{module}"), name)


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

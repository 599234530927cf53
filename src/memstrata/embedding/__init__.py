"""Embeddings: one ``Embedder`` protocol, one module per provider, and the cache.

Providers: ``hash`` (model-free, deterministic), ``local`` (all-MiniLM-L6-v2
in-process, optional extra), ``openai`` (any OpenAI-compatible server), ``ollama``,
``command`` (an operator's program). Build one with ``make_embedder(config)``.
"""

from memstrata.embedding.base import Embedder
from memstrata.embedding.cache import CachedEmbedder, EmbeddingCache
from memstrata.embedding.command import CommandEmbedder
from memstrata.embedding.config import EmbedderConfig
from memstrata.embedding.hash import HashEmbedder
from memstrata.embedding.local import LocalEmbedder, local_available
from memstrata.embedding.ollama import OllamaEmbedder
from memstrata.embedding.openai import OpenAIEmbedder
from memstrata.embedding.registry import PROVIDERS, default_embedder, make_embedder

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

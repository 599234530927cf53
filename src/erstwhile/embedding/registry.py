"""Provider name → factory, and the two ways to get an embedder.

Adding a provider is one module with an ``Embedder`` subclass and a
``from_config(config, secret_env)`` function, plus one line in ``PROVIDERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import import_module

from erstwhile.domain.errors import InvalidInput
from erstwhile.embedding import command, hash, local
from erstwhile.embedding.base import Embedder
from erstwhile.embedding.cache import CachedEmbedder, EmbeddingCache
from erstwhile.embedding.config import EmbedderConfig

Factory = Callable[[EmbedderConfig, frozenset[str]], Embedder]


def _lazy(module: str) -> Factory:
    """A factory that imports its provider's module (and httpx) when first used."""

    def factory(config: EmbedderConfig, secret_env: frozenset[str]) -> Embedder:
        built: Embedder = import_module(f"erstwhile.embedding.{module}").from_config(
            config, secret_env
        )
        return built

    return factory


PROVIDERS: dict[str, Factory] = {
    "hash": hash.from_config,
    "local": local.from_config,
    "openai": _lazy("openai"),
    "ollama": _lazy("ollama"),
    "command": command.from_config,
}


def make_embedder(
    config: EmbedderConfig,
    *,
    secret_env: Iterable[str] = (),
    cache: EmbeddingCache | None = None,
) -> Embedder:
    """Build the embedder ``config`` describes.

    ``secret_env`` names every environment variable that holds a configured secret
    anywhere in erstwhile (other namespaces' keys, extraction keys…): a ``command``
    provider's program never sees them. With ``cache``, the embedder consults it.
    """
    name = config.provider.strip().lower()
    if name == "auto":
        name = "local" if local.local_available() else "hash"
        config = config.model_copy(update={"provider": name})
    factory = PROVIDERS.get(name)
    if factory is None:
        raise InvalidInput(
            f"embedding.provider {config.provider!r} is unknown: "
            f"use one of auto, {', '.join(sorted(PROVIDERS))}"
        )
    embedder = factory(config, frozenset(secret_env))
    if cache is not None:
        return CachedEmbedder(embedder, cache)
    return embedder


def default_embedder() -> Embedder:
    """The best embedder available offline: the local model if installed, else hashing."""
    if local.local_available():
        return local.LocalEmbedder()
    return hash.HashEmbedder()

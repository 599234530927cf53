"""The one embedding protocol: a provider implements ``_embed_batch``, the rest is here.

Truncation, batching, shape checks and L2 normalisation are done once, in this base
class, so that every provider returns vectors the store can compare: float32 rows of
unit length, one per input, in input order. A provider that answers with the wrong
count or dimension raises ``ProviderFailed`` instead of writing nonsense.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from types import TracebackType

import numpy as np

from erstwhile.domain.errors import InvalidInput, ProviderFailed

DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_CHARS = 8000


class Embedder(ABC):
    """Turns texts into unit vectors. Subclasses set ``provider`` and implement one method."""

    provider: str
    model: str
    dimensions: int
    batch_size: int = DEFAULT_BATCH_SIZE
    max_chars: int = DEFAULT_MAX_CHARS

    def __init__(
        self,
        *,
        model: str,
        dimensions: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        if not model:
            raise InvalidInput("embedding.model must be a non-empty model name")
        for name, value in (
            ("dimensions", dimensions),
            ("batch_size", batch_size),
            ("max_chars", max_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidInput(f"embedding.{name} must be a positive integer, got {value!r}")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_chars = max_chars

    @property
    def embedder_id(self) -> str:
        """``provider:model:dimensions`` — vectors are stored and compared under this id."""
        return f"{self.provider}:{self.model}:{self.dimensions}"

    @abstractmethod
    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        """Embed at most ``batch_size`` already-truncated texts; return shape (n, dimensions).

        ``query`` is True for a search query, False for stored documents; models that
        prefix the two differently use it, the others ignore it.
        """

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts for storage: float32, shape (len(texts), dimensions), unit rows."""
        return self._embed(texts, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query: float32, shape (dimensions,), unit length."""
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be a string, got {type(text).__name__}")
        return self._embed([text], query=True)[0]

    def close(self) -> None:  # noqa: B027 - an optional hook, not an abstract one
        """Release pooled connections or models. Embedders without any keep this no-op."""

    def __enter__(self) -> Embedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        # Only identity goes here: URLs may carry credentials and keys never appear.
        return f"{type(self).__name__}(embedder_id={self.embedder_id!r})"

    # -- the pipeline every provider shares --------------------------------------

    def truncate(self, text: str) -> str:
        """The part of ``text`` the provider sees (SPEC §5: the first ``max_chars``)."""
        return text[: self.max_chars]

    def _embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        items = check_texts(texts)
        out = np.empty((len(items), self.dimensions), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            chunk = [self.truncate(t) for t in items[start : start + self.batch_size]]
            raw = self._embed_batch(chunk, query=query)
            out[start : start + len(chunk)] = self._checked(raw, len(chunk))
        return out

    def _checked(self, raw: object, expected: int) -> np.ndarray:
        """Validate one provider answer and return it as unit float32 rows."""
        try:
            vectors = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError):
            raise ProviderFailed(
                f"{self.embedder_id} returned something that is not a matrix of numbers"
            ) from None
        if vectors.ndim != 2 or vectors.shape[0] != expected:
            raise ProviderFailed(
                f"{self.embedder_id} returned {_describe(vectors)} for {expected} texts; "
                f"expected {expected} vectors"
            )
        if vectors.shape[1] != self.dimensions:
            raise ProviderFailed(
                f"{self.embedder_id} returned vectors of dimension {vectors.shape[1]}, "
                f"configured {self.dimensions}: set embedding.dimensions = {vectors.shape[1]} "
                "or choose a model that produces the configured size"
            )
        if not np.all(np.isfinite(vectors)):
            raise ProviderFailed(f"{self.embedder_id} returned NaN or infinite values")
        return normalise(vectors, self.embedder_id)


def normalise(vectors: np.ndarray, embedder_id: str) -> np.ndarray:
    """L2-normalise rows; a zero row has no direction, so it is a provider failure."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ProviderFailed(f"{embedder_id} returned an all-zero vector, which has no direction")
    return (vectors / norms).astype(np.float32, copy=False)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each non-empty secret value in ``text``."""
    for value in secrets:
        if value:
            text = text.replace(value, "**********")
    return text


def check_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding it character by character is
    # never what the caller meant.
    if isinstance(texts, str):
        raise InvalidInput("embed_documents takes a list of texts, not a single string")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInput(f"texts[{i}] must be a string, got {type(text).__name__}")
    return items


def _describe(vectors: np.ndarray) -> str:
    if vectors.ndim == 2:
        return f"{vectors.shape[0]} vectors"
    return f"an array of shape {vectors.shape}"

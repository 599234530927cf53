"""The one extraction protocol: a provider implements ``_extract``, the rest is here.

A provider answers with whatever it answers; :meth:`Extractor.extract` truncates the
text it is shown, checks the answer's bounds (:mod:`erstwhile.extraction.answers`)
and reads it through :func:`~erstwhile.domain.graph.normalise_extraction`, the one
place provider output becomes the closed vocabulary. A provider that cannot answer raises
``ProviderFailed``, which fails the extract job visibly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from erstwhile.domain.errors import ProviderFailed
from erstwhile.domain.graph import ENTITY_KINDS, PREDICATES, Extraction, normalise_extraction
from erstwhile.extraction.answers import AnswerRefused, check_answer

DEFAULT_MAX_CHARS = 8000


def vocabulary() -> dict[str, list[str]]:
    """The closed vocabulary, as providers are told it."""
    return {"kinds": list(ENTITY_KINDS), "predicates": list(PREDICATES)}


class Extractor(ABC):
    """Finds entities and facts in a text. Subclasses set ``provider``."""

    provider: str
    model: str = ""
    max_chars: int = DEFAULT_MAX_CHARS

    @property
    def extractor_id(self) -> str:
        """``provider`` or ``provider:model``: recorded on every extracted fact."""
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @abstractmethod
    def _extract(self, text: str) -> Any:
        """The provider's raw answer for one (truncated) text:
        ``{"entities": [{"name", "kind"}], "facts": [{"subject", "predicate", "object",
        "confidence"}]}`` or anything else, which normalises to nothing."""

    def extract(self, text: str, *, min_confidence: float = 0.0) -> Extraction:
        """What the provider finds in ``text``, read within bounds: an answer past them
        (:func:`~erstwhile.extraction.answers.check_answer`) fails it, visibly."""
        answer = self._extract(text[: self.max_chars])
        try:
            check_answer(answer, what=f"{self.extractor_id}'s answer")
        except AnswerRefused as refused:
            raise ProviderFailed(f"{refused}; nothing was read from it") from None
        return normalise_extraction(answer, min_confidence=min_confidence)

    def close(self) -> None:  # noqa: B027 - an optional hook, not an abstract one
        """Release pooled connections. Extractors without any keep this no-op."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(extractor_id={self.extractor_id!r})"

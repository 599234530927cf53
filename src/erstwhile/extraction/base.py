"""The one extraction protocol: a provider implements ``_extract``, the rest is here.

A provider answers with whatever it answers; :meth:`Extractor.extract` truncates the
text it is shown, checks the answer's bounds (:mod:`erstwhile.extraction.answers`)
and reads it through :func:`~erstwhile.domain.graph.normalise_extraction`, the one
place provider output becomes the closed vocabulary. A provider that cannot answer raises
``ProviderFailed``, which fails the extract job visibly. Each call is counted in the
:class:`~erstwhile.extraction.usage.Usage` the caller passes: the call, its time, a
failure; a provider that knows more (retries, tokens, an unreadable answer) overrides
:meth:`Extractor._extract_counted` to add it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

from erstwhile.domain.errors import ProviderFailed
from erstwhile.domain.graph import ENTITY_KINDS, PREDICATES, Extraction, normalise_extraction
from erstwhile.extraction.answers import AnswerRefused, check_answer
from erstwhile.extraction.usage import Usage

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

    def _extract_counted(self, text: str, usage: Usage) -> Any:
        """``_extract``, for a provider that adds what it knows of the call to ``usage``
        (retries, tokens, an answer read as nothing found); by default, nothing."""
        return self._extract(text)

    def extract(
        self, text: str, *, min_confidence: float = 0.0, usage: Usage | None = None
    ) -> Extraction:
        """What the provider finds in ``text``, read within bounds: an answer past them
        (:func:`~erstwhile.extraction.answers.check_answer`) fails it, visibly. The
        call is counted in ``usage`` (a failure too, before it goes on up)."""
        usage = Usage() if usage is None else usage
        usage.calls += 1
        started = time.monotonic_ns()
        try:
            answer = self._extract_counted(text[: self.max_chars], usage)
            check_answer(answer, what=f"{self.extractor_id}'s answer")
        except AnswerRefused as refused:
            usage.failed += 1
            raise ProviderFailed(f"{refused}; nothing was read from it") from None
        except Exception:
            usage.failed += 1
            raise
        finally:
            usage.provider_us += (time.monotonic_ns() - started) // 1000
        return normalise_extraction(answer, min_confidence=min_confidence)

    def close(self) -> None:  # noqa: B027 - an optional hook, not an abstract one
        """Release pooled connections. Extractors without any keep this no-op."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(extractor_id={self.extractor_id!r})"

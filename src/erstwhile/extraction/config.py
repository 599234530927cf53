"""How the extractor is configured (the ``[extraction]`` table).

Like an embedder's config, it holds the *name* of the environment variable with the
key, never the key. ``provider = "none"`` (the default) extracts nothing: ``command``
and ``http`` send record text elsewhere, so nothing leaves until an operator asks.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from erstwhile.extraction.base import DEFAULT_MAX_CHARS
from erstwhile.extraction.usage import Budget, CallLimit, TokenLimit

DEFAULT_MIN_CONFIDENCE = 0.5


class ExtractorConfig(BaseModel):
    """One extractor. Fields a provider does not use are ignored by it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = "none"
    min_confidence: float = Field(default=DEFAULT_MIN_CONFIDENCE, ge=0, le=1)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    command: list[str] | None = None
    max_chars: int = Field(default=DEFAULT_MAX_CHARS, gt=0)
    max_attempts: int = Field(default=4, ge=1, le=10)
    backoff_base: float = Field(default=0.5, ge=0)
    #: an extract job's budget (:mod:`erstwhile.extraction.usage`); unset: none
    max_calls: CallLimit | None = None
    max_tokens: TokenLimit | None = None

    def budget(self) -> Budget:
        return Budget(max_calls=self.max_calls, max_tokens=self.max_tokens)

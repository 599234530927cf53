"""An operator's own program as the extractor: one process per text, JSON both ways.

Protocol (version 1)::

    stdin   {"text": "...", "model": "<model>",
             "vocabulary": {"kinds": [...], "predicates": [...]}}
    stdout  {"entities": [{"name", "kind"}], "facts": [{"subject", "predicate",
             "object", "confidence"}]}
    exit 0 on success; anything else (and stderr) is reported as ProviderFailed, as
    is stdout past a bound of :mod:`erstwhile.extraction.answers` (size, nesting,
    numbers, strings).

The program runs with erstwhile's environment stripped (:mod:`erstwhile.program`),
so it owns the model and its credentials and never sees erstwhile's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from erstwhile import program
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.extraction.answers import AnswerRefused, parse_answer
from erstwhile.extraction.base import DEFAULT_MAX_CHARS, Extractor, vocabulary
from erstwhile.extraction.config import ExtractorConfig


class CommandExtractor(Extractor):
    """Runs ``argv`` once per text. ``secret_env`` names variables it must never see."""

    provider = "command"

    def __init__(
        self,
        argv: list[str],
        *,
        model: str = "",
        secret_env: Iterable[str] = (),
        timeout: float = 60.0,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.argv = program.check_argv(argv, "extraction.command")
        self.model = model
        self.timeout = timeout
        self.max_chars = max_chars
        self._secret_env = frozenset(secret_env)

    def _extract(self, text: str) -> Any:
        request = {"text": text, "model": self.model, "vocabulary": vocabulary()}
        stdout = program.run_json(
            self.argv, request, secret_env=self._secret_env, timeout=self.timeout,
            describe=self.extractor_id, timeout_setting="extraction.timeout",
        )  # fmt: skip
        try:
            return parse_answer(stdout, what="stdout")
        except AnswerRefused as refused:
            raise ProviderFailed(
                f"{self.extractor_id}: command {self.argv[0]!r} failed: {refused}"
            ) from None
        except ValueError:  # UnicodeDecodeError and JSONDecodeError too
            raise ProviderFailed(
                f"{self.extractor_id}: command {self.argv[0]!r} failed: stdout is not JSON; "
                'expected {"entities": [...], "facts": [...]}'
            ) from None


def from_config(config: ExtractorConfig, secret_env: frozenset[str]) -> CommandExtractor:
    if not config.command:
        raise InvalidInput('extraction.command is required for provider "command"')
    hidden = set(secret_env)
    if config.api_key_env:
        hidden.add(config.api_key_env)  # a key configured here is still never passed on
    return CommandExtractor(
        config.command, model=config.model or "", secret_env=hidden,
        timeout=config.timeout, max_chars=config.max_chars,
    )  # fmt: skip

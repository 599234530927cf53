"""OpenAI-compatible ``POST {base_url}/chat/completions`` as the extractor.

The system message states the closed vocabulary and the JSON shape asked for; the
user message is the record's text. The answer is ``choices[0].message.content``,
which must be that JSON. A reply that is not (a model that chatted, an HTML page, a
truncated body), or passes a bound of :mod:`erstwhile.extraction.answers` (nesting,
size, a number or a string out of range), is logged and read as "nothing found":
failing would block every record behind it on every sweep. Transport failures and
HTTP errors are retried and then fail the job (:class:`~erstwhile.embedding.http.HttpClient`).

Each call adds to the job's :class:`~erstwhile.extraction.usage.Usage`: its retries,
the reply's ``usage`` tokens when the server sends them (a reply read as nothing
found still cost them), and whether the answer was unreadable.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from erstwhile.domain.graph import ENTITY_KINDS, PREDICATES
from erstwhile.domain.secrets import Secret
from erstwhile.embedding.config import secret_from_env
from erstwhile.embedding.http import HttpClient
from erstwhile.extraction.answers import parse_answer
from erstwhile.extraction.base import DEFAULT_MAX_CHARS, Extractor
from erstwhile.extraction.config import ExtractorConfig
from erstwhile.extraction.usage import Usage, read_usage

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

PROMPT = (
    "Extract the named entities and the facts between them from the user's text. "
    'Answer with one JSON object and nothing else: {"entities": [{"name": "...", '
    '"kind": "..."}], "facts": [{"subject": "...", "predicate": "...", "object": "...", '
    '"confidence": 0.0-1.0}]}. '
    f"kind is one of: {', '.join(ENTITY_KINDS)}. "
    f"predicate is one of: {', '.join(PREDICATES)}. "
    "subject and object are names from entities. Use the names as the text spells them. "
    "Leave out anything the text does not state."
)


class HttpExtractor(Extractor):
    """Extracts through an OpenAI-compatible chat server (OpenAI, vLLM, llama.cpp…)."""

    provider = "http"

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        base_url: str = DEFAULT_BASE_URL,
        api_key: Secret | None = None,
        timeout: float = 60.0,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self.max_chars = max_chars
        self._http = HttpClient(
            name=self.extractor_id, base_url=base_url, api_key=api_key, timeout=timeout,
            max_attempts=max_attempts, backoff_base=backoff_base, transport=transport,
            setting="extraction.base_url",
        )  # fmt: skip

    def _extract(self, text: str) -> Any:
        return self._extract_counted(text, Usage())

    def _extract_counted(self, text: str, usage: Usage) -> Any:
        payload = {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": PROMPT},
                {"role": "user", "content": text},
            ],
        }

        def retried() -> None:
            usage.retries += 1

        reply = self._http.post_json("/chat/completions", payload, raw=True, on_retry=retried)
        try:
            decoded = parse_answer(reply, what="the reply")
            tokens = read_usage(decoded)
            if tokens is not None:
                usage.add_tokens(*tokens)
            content = decoded["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("the message's content is not text")
            answer = parse_answer(content, what="the message")
            if not isinstance(answer, dict):
                raise TypeError("not an object")
        except (ValueError, KeyError, IndexError, TypeError) as error:
            log.warning(
                "%s: the reply is not the JSON asked for (%s: %.200r); read as nothing found",
                self.extractor_id, type(error).__name__, reply,
            )  # fmt: skip
            usage.unreadable += 1
            return {}
        return answer

    def close(self) -> None:
        self._http.close()


def from_config(config: ExtractorConfig, secret_env: frozenset[str]) -> HttpExtractor:
    return HttpExtractor(
        model=config.model or DEFAULT_MODEL,
        base_url=config.base_url or DEFAULT_BASE_URL,
        api_key=secret_from_env(config.api_key_env, setting="extraction.api_key_env"),
        timeout=config.timeout, max_chars=config.max_chars,
        max_attempts=config.max_attempts, backoff_base=config.backoff_base,
    )  # fmt: skip

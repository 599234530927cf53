"""The HTTP plumbing the remote providers share: one pooled client, retries, errors,
and ``HttpEmbedder``, the base of the providers reached over HTTP.

    httpx.TransportError (connect, timeout, …)  ─┐ retried with backoff, then
    HTTP 408 / 429 / 5xx                          ─┘ ProviderFailed
    any other HTTP >= 300, a non-JSON body        ─→ ProviderFailed at once

Everything leaves this module as ``ProviderFailed`` raised ``from None``, and every
message is passed through ``redact`` so a key never reaches a log or an error, even
when a server echoes it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar, Self

import httpx

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.domain.secrets import Secret
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, Embedder, redact
from erstwhile.embedding.config import EmbedderConfig, secret_from_env

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 429})
_BODY_EXCERPT = 300


class HttpClient:
    """JSON-over-HTTP for one provider instance; one connection pool for its lifetime."""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: Secret | None = None,
        timeout: float = 30.0,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 20.0,
        transport: httpx.BaseTransport | None = None,
        setting: str = "embedding.base_url",
    ) -> None:
        self.name = name
        self.base_url = _checked_base_url(base_url, setting)
        self._api_key = api_key
        self._max_attempts = max(1, max_attempts)
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after
        # The key is not set on the client: it is added per request, at the point of use.
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            transport=transport,
            follow_redirects=False,
            headers={"Accept": "application/json"},
        )

    @property
    def display_url(self) -> str:
        """The base URL without user info or query, safe to show."""
        return _display(self.base_url)

    def post_json(
        self,
        path: str,
        payload: dict[str, Any],
        *,
        raw: bool = False,
        on_retry: Callable[[], None] | None = None,
    ) -> Any:
        """POST ``payload`` to ``base_url + path`` and return the decoded JSON reply
        (``raw``: the reply's text, for a caller that reads a bad reply its own way);
        ``on_retry`` is told of each attempt made again."""
        url = self.base_url + path
        failure = "no attempt made"
        for attempt in range(1, self._max_attempts + 1):
            delay = self._backoff(attempt)
            try:
                response = self._client.post(url, json=payload, headers=self._auth())
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return response.text if raw else self._decode(response, path)
                failure = self._describe(response)
                if not _retryable(response.status_code):
                    raise ProviderFailed(self._message(path, failure)) from None
                retry_after = _retry_after(response)
                if retry_after is not None and retry_after > self._max_retry_after:
                    # Waiting that long inline would stall the caller; the job retries later.
                    raise ProviderFailed(
                        self._message(
                            path,
                            f"{failure}; the server asks to wait {retry_after:g} s, "
                            f"more than the {self._max_retry_after:g} s waited inline",
                        )
                    )
                if retry_after is not None:
                    delay = retry_after
            if attempt < self._max_attempts:
                log.warning(
                    "%s %s attempt %d/%d failed (%s); retrying in %.3g s",
                    self.name,
                    path,
                    attempt,
                    self._max_attempts,
                    self._redact(failure),
                    delay,
                )
                time.sleep(delay)
                if on_retry is not None:
                    on_retry()
        raise ProviderFailed(
            self._message(path, f"gave up after {self._max_attempts} attempts: {failure}")
        )

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"HttpClient(name={self.name!r}, base_url={self.display_url!r})"

    # -- helpers ------------------------------------------------------------------

    def _auth(self) -> dict[str, str]:
        if self._api_key is None:
            return {}
        return {"Authorization": f"Bearer {self._api_key.reveal()}"}

    def _backoff(self, attempt: int) -> float:
        return float(min(self._backoff_max, self._backoff_base * 2 ** (attempt - 1)))

    def _decode(self, response: httpx.Response, path: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ProviderFailed(
                self._message(path, f"the reply is not JSON: {_excerpt(response.text)!r}")
            ) from None

    def _describe(self, response: httpx.Response) -> str:
        body = _excerpt(response.text)
        return f"HTTP {response.status_code} {response.reason_phrase}" + (
            f": {body}" if body else ""
        )

    def _message(self, path: str, detail: str) -> str:
        return self._redact(f"{self.name} request to {self.display_url}{path} failed: {detail}")

    def _redact(self, text: str) -> str:
        return redact(text, [self._api_key.reveal()] if self._api_key else [])


def _retryable(status: int) -> bool:
    return status in _RETRY_STATUS or status >= 500


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds; the HTTP-date form is rare here and falls back to backoff."""
    value = response.headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(seconds, 0.0)


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _BODY_EXCERPT else text[:_BODY_EXCERPT] + "…"


def _checked_base_url(base_url: str, setting: str) -> str:
    """``base_url`` without a trailing slash; else :class:`InvalidInput` naming the
    ``setting`` it came from (``embedding.base_url``, ``extraction.base_url``, …)."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        raise InvalidInput(f"{setting} {_display_raw(base_url)!r} is not a URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInput(
            f"{setting} {_display_raw(base_url)!r} must be an http:// or https:// URL"
        )
    return base_url.rstrip("/")


def _display(base_url: str) -> str:
    url = httpx.URL(base_url)
    return str(url.copy_with(userinfo=b"", query=None, fragment=None))


def _display_raw(base_url: object) -> str:
    try:
        return _display(str(base_url))
    except Exception:  # an unparseable URL may hold anything; show only its kind
        return "<unparseable>"


class HttpEmbedder(Embedder):
    """A provider reached over JSON-over-HTTP: the size from ``dimensions`` or the
    model's known size, one pooled :class:`HttpClient`, and construction from config.
    Subclasses say how to ask and how to read the reply (``_embed_batch``)."""

    DEFAULT_BASE_URL: ClassVar[str]
    DEFAULT_MODEL: ClassVar[str]
    #: Native sizes of common models, so these need no ``dimensions``.
    KNOWN_DIMENSIONS: ClassVar[dict[str, int]] = {}
    #: How the error for an unknown size names the model ("model", "Ollama model").
    MODEL_LABEL: ClassVar[str] = "model"
    #: The variable the key is read from when no ``api_key_env`` is configured (None:
    #: no key unless one is configured).
    DEFAULT_KEY_ENV: ClassVar[str | None] = None

    def __init__(
        self,
        *,
        model: str,
        dimensions: int | None,
        base_url: str,
        api_key: Secret | None,
        timeout: float,
        batch_size: int,
        max_chars: int,
        max_attempts: int,
        backoff_base: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        size = dimensions or self.known_size(model)
        if size is None:
            raise InvalidInput(
                f"embedding.dimensions is required for {self.MODEL_LABEL} {model!r}: "
                "set it to the size of the vectors the model returns"
            )
        super().__init__(model=model, dimensions=size, batch_size=batch_size, max_chars=max_chars)
        self._http = HttpClient(
            name=self.embedder_id,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            transport=transport,
        )

    @classmethod
    def known_size(cls, model: str) -> int | None:
        return cls.KNOWN_DIMENSIONS.get(model)

    @classmethod
    def from_config(cls, config: EmbedderConfig, secret_env: frozenset[str]) -> Self:
        """Build from config; the key is read now from ``api_key_env`` if one is named
        (it must be set), else from :attr:`DEFAULT_KEY_ENV` when that is set (a server
        speaking the provider's API may need no key)."""
        default_env = None if config.api_key_env else cls.DEFAULT_KEY_ENV
        return cls(
            model=config.model or cls.DEFAULT_MODEL,
            dimensions=config.dimensions,
            base_url=config.base_url or cls.DEFAULT_BASE_URL,
            api_key=secret_from_env(config.api_key_env or default_env, required=not default_env),
            timeout=config.timeout,
            batch_size=config.batch_size or DEFAULT_BATCH_SIZE,
            max_chars=config.max_chars,
            max_attempts=config.max_attempts,
            backoff_base=config.backoff_base,
        )

    def close(self) -> None:
        self._http.close()

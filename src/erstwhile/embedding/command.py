"""An operator's own program as the embedder: one process per batch, JSON both ways.

Protocol (version 1)::

    stdin   {"input": ["text", ...], "model": "<model>", "dimensions": <d>,
             "kind": "document" | "query"}
    stdout  {"embeddings": [[float, ...], ...]}      one vector per input, in order
    exit 0 on success; anything else (and stderr) is reported as ProviderFailed.

The program runs with a copy of erstwhile's environment minus every ``ERSTWHILE_*``
variable (erstwhile's own configuration and tokens) and minus every variable that
holds a configured secret, whether found by name or by value. No shell is involved:
``command`` is an argv list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import numpy as np

from erstwhile import program
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS, Embedder
from erstwhile.embedding.config import EmbedderConfig


class CommandEmbedder(Embedder):
    """Runs ``argv`` once per batch. ``secret_env`` names variables it must never see."""

    provider = "command"

    def __init__(
        self,
        argv: list[str],
        *,
        model: str,
        dimensions: int,
        secret_env: Iterable[str] = (),
        timeout: float = 30.0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        argv = program.check_argv(argv, "embedding.command")
        super().__init__(
            model=model, dimensions=dimensions, batch_size=batch_size, max_chars=max_chars
        )
        self.argv = list(argv)
        self.timeout = timeout
        self._secret_env = frozenset(secret_env)

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        request = {
            "input": texts,
            "model": self.model,
            "dimensions": self.dimensions,
            "kind": "query" if query else "document",
        }
        stdout = program.run_json(
            self.argv, request, secret_env=self._secret_env, timeout=self.timeout,
            describe=self.embedder_id, timeout_setting="embedding.timeout",
        )  # fmt: skip
        return self._parse(stdout)

    def child_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment the program gets: ``environ`` minus ours and minus secrets."""
        return program.child_env(environ, self._secret_env)

    def _parse(self, stdout: bytes) -> np.ndarray:
        try:
            reply = json.loads(stdout)
        except (UnicodeDecodeError, ValueError):
            raise ProviderFailed(
                self._failure('stdout is not JSON; expected {"embeddings": [[...], ...]}')
            ) from None
        embeddings = reply.get("embeddings") if isinstance(reply, dict) else None
        if not isinstance(embeddings, list):
            raise ProviderFailed(self._failure('stdout JSON has no "embeddings" list'))
        if not embeddings:
            return np.empty((0, self.dimensions), dtype=np.float32)
        try:
            return np.asarray(embeddings, dtype=np.float32).reshape(len(embeddings), -1)
        except (TypeError, ValueError):
            raise ProviderFailed(
                self._failure('"embeddings" must be a list of equal-length number lists')
            ) from None

    def _failure(self, detail: str) -> str:
        return f"{self.embedder_id}: command {self.argv[0]!r} failed: {detail}"


def from_config(config: EmbedderConfig, secret_env: frozenset[str]) -> CommandEmbedder:
    if not config.command:
        raise InvalidInput('embedding.command is required for provider "command"')
    if not config.model or config.dimensions is None:
        raise InvalidInput(
            'provider "command" needs embedding.model (a name for what it computes) '
            "and embedding.dimensions (the size of its vectors)"
        )
    hidden = set(secret_env)
    if config.api_key_env:
        # A key configured for this embedder is still a secret: no subprocess gets it.
        hidden.add(config.api_key_env)
    return CommandEmbedder(
        config.command,
        model=config.model,
        dimensions=config.dimensions,
        secret_env=hidden,
        timeout=config.timeout,
        batch_size=config.batch_size or DEFAULT_BATCH_SIZE,
        max_chars=config.max_chars,
    )

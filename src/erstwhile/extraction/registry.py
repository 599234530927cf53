"""Provider name → factory, and building an extractor from a spec.

Adding a provider is one module with an ``Extractor`` subclass and a
``from_config(config, secret_env)`` function, plus one line in ``PROVIDERS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.validation import parse_model
from erstwhile.extraction import command
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.config import ExtractorConfig
from erstwhile.extraction.heuristic import HeuristicExtractor
from erstwhile.extraction.usage import Budget

Factory = Callable[[ExtractorConfig, frozenset[str]], Extractor]

PROVIDERS: dict[str, Factory] = {
    "heuristic": lambda config, secret_env: HeuristicExtractor(),
    "command": command.from_config,
    "http": lambda config, secret_env: _http().from_config(config, secret_env),
}


def _http() -> Any:
    """The HTTP extractor's module, imported when configured: it brings httpx."""
    from erstwhile.extraction import http

    return http


ExtractorSpec = Extractor | ExtractorConfig | Mapping[str, Any] | str | None


def make_extractor(config: ExtractorConfig, *, secret_env: Iterable[str] = ()) -> Extractor | None:
    """The extractor ``config`` describes, or None for ``provider = "none"``."""
    name = config.provider.strip().lower()
    if name == "none":
        return None
    factory = PROVIDERS.get(name)
    if factory is None:
        raise InvalidInput(
            f"extraction.provider {config.provider!r} is unknown: "
            f"use one of none, {', '.join(sorted(PROVIDERS))}"
        )
    return factory(config, frozenset(secret_env))


def build_extractor(spec: ExtractorSpec) -> tuple[Extractor | None, float]:
    """An extractor and its ``min_confidence`` from a spec: an instance, a config (or
    its dict), a provider name, or ``None`` for ``ERSTWHILE_EXTRACTOR`` (default none)."""
    if spec is None:
        spec = os.environ.get("ERSTWHILE_EXTRACTOR") or "none"
    if isinstance(spec, Extractor):
        return spec, ExtractorConfig().min_confidence
    if isinstance(spec, str):
        spec = ExtractorConfig(provider=spec)
    config = parse_model(ExtractorConfig, spec, "extraction")
    return make_extractor(config), config.min_confidence


def build_budget(spec: ExtractorSpec) -> Budget:
    """The extract job's budget a spec sets (``max_calls``, ``max_tokens`` of a config or
    its dict); none for an instance or a provider name."""
    if spec is None or isinstance(spec, Extractor | str):
        return Budget()
    return parse_model(ExtractorConfig, spec, "extraction").budget()

"""How one embedder is configured (the ``[embedding]`` table, or a namespace's).

The config holds the *name* of the environment variable with the key, never the
key: the value is read when the embedder is built and kept as a ``Secret``.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.secrets import Secret
from erstwhile.embedding.base import DEFAULT_MAX_CHARS


class EmbedderConfig(BaseModel):
    """One embedder. Fields a provider does not use are ignored by it.

    ``provider`` is one of the registry's names, or ``auto`` for the best embedder
    available offline (``local`` when its extra is installed, else ``hash``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = "auto"
    model: str | None = None
    dimensions: int | None = Field(default=None, gt=0)
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    command: list[str] | None = None
    batch_size: int | None = Field(default=None, gt=0)
    max_chars: int = Field(default=DEFAULT_MAX_CHARS, gt=0)
    max_attempts: int = Field(default=4, ge=1, le=10)
    backoff_base: float = Field(default=0.5, ge=0)


def secret_from_env(
    env_name: str | None, *, required: bool = True, setting: str = "embedding.api_key_env"
) -> Secret | None:
    """Read the key named by ``api_key_env``; None when no variable is configured."""
    if not env_name:
        return None
    value = os.environ.get(env_name, "")
    if not value and required:
        raise InvalidInput(
            f"{setting} names {env_name}, which is not set in the environment: "
            f"export {env_name} or change api_key_env"
        )
    return Secret(value) if value else None

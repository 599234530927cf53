"""What every command shares: the global options, and the one place the store opens.

Commands never call :func:`erstwhile.open` themselves; they call :func:`open_memory`
(or :func:`settings`), so configuration reaches every command the same way: the
config file (``--config`` or ``ERSTWHILE_CONFIG``), then the ``ERSTWHILE_*``
environment, then the global options (``--db``, ``--embedder``, ``--extractor``,
given before or after the command, or through their own variables ``ERSTWHILE_DB``,
``ERSTWHILE_EMBEDDER``, ``ERSTWHILE_EXTRACTOR``), highest last.

The config's ``[server]``, ``[auth]`` and ``[policy]`` tables are the server's: a
command run here opens the store as the embedded API does, without caps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

import erstwhile
from erstwhile.cli.options import EmbedderName, ExtractorName
from erstwhile.memory import CONFIG_ENV, Memory, default_path

# the config module (pydantic-settings) is imported only when there is a config to
# read, not by every CLI call
if TYPE_CHECKING:
    from erstwhile.config import Settings

#: The config's top-level tables; ``ERSTWHILE_<TABLE>`` and ``ERSTWHILE_<TABLE>__…``
#: are settings variables (pydantic-settings reads them in any case).
SETTINGS_TABLES = ("storage", "server", "auth", "policy", "embedding", "extraction", "namespaces")


@dataclass
class CliState:
    """The global options, kept on the root context's ``obj``; None = not given."""

    db: str | None = None
    config: str | None = None
    embedder: EmbedderName | None = None
    extractor: ExtractorName | None = None
    json: bool = False

    def target(self) -> str:
        """The database to open: ``--db``/``ERSTWHILE_DB``, else the user data file."""
        return self.db or str(default_path())

    def config_file(self) -> str | None:
        """``--config``, else ``ERSTWHILE_CONFIG``, else none."""
        return self.config or os.environ.get(CONFIG_ENV) or None


def cli_state(ctx: typer.Context) -> CliState:
    state = ctx.find_root().obj
    if not isinstance(state, CliState):
        state = CliState()
        ctx.find_root().obj = state
    return state


def settings_variables() -> list[str]:
    """The ``ERSTWHILE_*`` variables set here that the config loader reads."""
    found = []
    for name in os.environ:
        upper = name.upper()
        for table in SETTINGS_TABLES:
            prefix = f"ERSTWHILE_{table.upper()}"
            if upper == prefix or upper.startswith(prefix + "__"):
                found.append(name)
    return sorted(found)


def configured(ctx: typer.Context) -> bool:
    """Whether there is configuration beyond the global options: a config file, or a
    settings variable."""
    return cli_state(ctx).config_file() is not None or bool(settings_variables())


def settings(
    ctx: typer.Context, overrides: dict[str, Any] | None = None, *, target: str | None = None
) -> Settings:
    """The settings: file, environment, then the global options (``target`` in place
    of ``--db``) and ``overrides`` (a command's own options)."""
    from erstwhile.config import load_settings

    state = cli_state(ctx)
    merged: dict[str, Any] = dict(overrides or {})
    url = target or state.db
    if url:
        merged["storage"] = {**merged.get("storage", {}), "url": url}
    loaded = load_settings(state.config_file(), merged)
    update: dict[str, Any] = {}
    if state.embedder is not None:
        # another provider's model and dimensions do not carry over
        update["embedding"] = loaded.embedding.model_copy(
            update={"provider": state.embedder, "model": None, "dimensions": None}
        )
    if state.extractor is not None:  # the rest of [extraction] (its command ...) stays
        update["extraction"] = loaded.extraction.model_copy(update={"provider": state.extractor})
    return loaded.model_copy(update=update) if update else loaded


def open_memory(ctx: typer.Context, target: str | None = None, *, create: bool = True) -> Memory:
    """Opens the store the global options name (or ``target``); use it in a ``with``.
    Commands that only read or change what is stored pass ``create=False``: a read
    never creates a store, and a missing one is an error naming the path.

    The embedder and the extractor are the configured ones (the global options over
    the config's ``[embedding]`` and ``[extraction]``; by default ``auto``, the local
    model when installed, else hashing, and no extraction). No background jobs: the
    process is short-lived, and a backlog is filled by ``erstwhile embed`` and
    ``erstwhile extract``.

    A database that cannot be used is ``erstwhile.storage.unavailable``, reported
    like every other error (one line, not a traceback).
    """
    if configured(ctx):
        from erstwhile.config import open_memory as open_configured

        return open_configured(
            settings(ctx, target=target), background_jobs=False, create=create, caps=False
        )
    # No config to read: the same store, without loading the config machinery.
    state = cli_state(ctx)
    # "auto" is passed as is, not as None: None would re-read ERSTWHILE_EMBEDDER,
    # which an explicit --embedder auto must override.
    return erstwhile.open(
        target or state.target(), embedder=state.embedder or "auto",
        extractor=state.extractor or "none", background_jobs=False, create=create,
    )  # fmt: skip

"""What every command shares: the global options, and the one place the store opens.

Commands never call :func:`erstwhile.open` themselves; they call :func:`open_memory`,
so options that change how the store is opened (the database, the embedder, a
config file later) are read in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import typer

import erstwhile
from erstwhile.cli.options import EmbedderName, ExtractorName
from erstwhile.memory import Memory, default_path


@dataclass
class CliState:
    """The global options, kept on the root context's ``obj``."""

    db: str | None = None
    embedder: EmbedderName = "auto"
    extractor: ExtractorName = "none"

    def target(self) -> str:
        """The database to open: ``--db``/``ERSTWHILE_DB``, else the user data file."""
        return self.db or str(default_path())


def cli_state(ctx: typer.Context) -> CliState:
    state = ctx.find_root().obj
    if not isinstance(state, CliState):
        state = CliState()
        ctx.find_root().obj = state
    return state


def open_memory(ctx: typer.Context, target: str | None = None, *, create: bool = True) -> Memory:
    """Opens the store the global options name (or ``target``); use it in a ``with``.
    Commands that only read or change what is stored pass ``create=False``: a read
    never creates a store, and a missing one is an error naming the path.

    The embedder is the one ``--embedder`` names (``auto``: the local model when
    installed, else hashing), the extractor the one ``--extractor`` names. No
    background jobs: the process is short-lived, and a backlog is filled by
    ``erstwhile embed`` and ``erstwhile extract``.

    A database that cannot be used is ``erstwhile.storage.unavailable``, reported
    like every other error (one line, not a traceback).
    """
    state = cli_state(ctx)
    where = target or state.target()
    # "auto" is passed as is, not as None: None would re-read ERSTWHILE_EMBEDDER,
    # which an explicit --embedder auto must override.
    return erstwhile.open(
        where, embedder=state.embedder, extractor=state.extractor, background_jobs=False,
        create=create,
    )  # fmt: skip

"""The ``erstwhile`` command line (entry point ``erstwhile.cli:main``).

Modules: ``app`` (the Typer app and global options), ``globals`` (the global options
after the command too), ``context`` (the configuration and opening the store),
``options`` (shared options and parsers), ``output`` (rendering), and one module
per command group: ``records``, ``search``, ``embedding``, ``demo``.
"""

from __future__ import annotations

from erstwhile.cli.app import app
from erstwhile.cli.context import open_memory
from erstwhile.tuning import tune_process


def main() -> None:
    """Runs the CLI on ``sys.argv``, in a process tuned for erstwhile's writes (the
    process is the CLI's own: :func:`erstwhile.tune_process`)."""
    tune_process()
    app(prog_name="erstwhile")


__all__ = ["app", "main", "open_memory"]

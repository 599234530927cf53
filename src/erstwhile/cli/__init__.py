"""The ``erstwhile`` command line (entry point ``erstwhile.cli:main``).

Modules: ``app`` (the Typer app and global options), ``globals`` (the global options
after the command too), ``context`` (the configuration and opening the store),
``options`` (shared options and parsers), ``output`` (rendering), and one module
per command group: ``records``, ``search``, ``embedding``, ``demo``.
"""

from __future__ import annotations

from erstwhile.cli.app import app
from erstwhile.cli.context import open_memory


def main() -> None:
    """Runs the CLI on ``sys.argv``."""
    app(prog_name="erstwhile")


__all__ = ["app", "main", "open_memory"]

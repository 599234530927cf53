"""The ``memstrata`` command line (entry point ``memstrata.cli:main``).

Modules: ``app`` (the Typer app and global options), ``context`` (opening the store),
``options`` (shared options and parsers), ``output`` (rendering), and one module
per command group: ``records``, ``search``, ``embedding``, ``demo``.
"""

from __future__ import annotations

from memstrata.cli.app import app
from memstrata.cli.context import open_memory


def main() -> None:
    """Runs the CLI on ``sys.argv``."""
    app(prog_name="memstrata")


__all__ = ["app", "main", "open_memory"]

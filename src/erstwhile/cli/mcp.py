"""``erstwhile mcp``: serve the memory to an agent over MCP on stdin/stdout.

stdout carries nothing but protocol messages: logs and errors go to stderr, opening
the store runs with Python's stdout pointed at stderr, and while serving the SDK points
file descriptor 1 at stderr too, so stray output from a provider cannot corrupt the
stream.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Annotated

import typer

from erstwhile.cli.context import open_memory

LOG_FORMAT = "erstwhile mcp: %(levelname)s %(name)s: %(message)s"


def mcp(
    ctx: typer.Context,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only", help="Offer only the read tools (search, get, history); no writes."
        ),
    ] = False,
    namespace: Annotated[
        str,
        typer.Option(
            "--namespace",
            "-n",
            metavar="NAME",
            envvar="ERSTWHILE_NAMESPACE",
            help="Default memory space of every tool (a call may name another).",
        ),
    ] = "default",
) -> None:
    """Serve erstwhile to an agent over MCP on stdin/stdout (the client starts it)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=LOG_FORMAT)
    # The SDK is imported here, not at the top: other commands should not pay for it.
    from erstwhile.adapters.mcp import run_stdio

    with contextlib.redirect_stdout(sys.stderr):
        memory = open_memory(ctx)
    with memory:
        run_stdio(memory.service, read_only=read_only, namespace=namespace)


def register(app: typer.Typer) -> None:
    app.command("mcp", rich_help_panel="Server")(mcp)

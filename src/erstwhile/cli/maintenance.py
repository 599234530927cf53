"""Keeping memory safe: ``backup PATH``, ``export [--namespace] [--graph] [--output FILE]`` and
``check [--json]`` (an export is restored with ``erstwhile import FILE``).

``check`` exits 0 when every invariant holds and 1 when one does not, so a cron job or
a CI step can act on it; ``--json`` prints the full report either way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer

from erstwhile import backups
from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput
from erstwhile.memory import Memory


def backup(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(help="The new file to write the copy to.", show_default=False)
    ],
) -> None:
    """Copy a live SQLite store to a new file, consistently, while writers run.

    For PostgreSQL use pg_dump (docs/backup.md), or erstwhile export.
    """
    with open_memory(ctx) as memory:
        backups.backup(memory, path)
    output.console().print(f"backed up to {path}", markup=False)


def export(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", metavar="NAME", help="Only this namespace."),
    ] = None,
    to: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout."),
    ] = None,
    graph: Annotated[
        str,
        typer.Option(
            "--graph",
            metavar="whole|told",
            help="The whole graph, or only what people told it (import leaves the rest "
            "to erstwhile extract).",
        ),
    ] = "whole",
) -> None:
    """Write every record with all its versions, the namespace settings and the graph
    as JSON Lines (import restores them)."""
    with open_memory(ctx) as memory:
        if to is None:
            _write(memory, namespace, graph, sys.stdout)
            return
        with open(to, "w", encoding="utf-8", newline="\n") as file:
            _write(memory, namespace, graph, file)


def _write(memory: Memory, namespace: str | None, graph: str, file: TextIO) -> None:
    for line in backups.export_lines(memory, namespace, graph=graph):
        file.write(line + "\n")
    file.flush()


def check(ctx: typer.Context, as_json: JsonOutput = False) -> None:
    """Verify the store: integrity, keys, chains, versions, ledger and vectors."""
    with open_memory(ctx) as memory:
        report = backups.check(memory)
    if as_json:
        output.print_json(report.to_json())
    else:
        out = output.console()
        for finding in report.findings:
            out.print(f"{'ok  ' if finding.ok else 'FAIL'}  {finding.name}", markup=False)
            for problem in finding.problems:
                out.print(f"      {problem}", markup=False)
            for note in finding.notes:
                out.print(f"      note: {note}", markup=False)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for command in (backup, export, check):
        app.command(rich_help_panel="Maintain")(command)

"""The mine command: ``erstwhile mine PATH [-n NS] [--include GLOB] [--exclude GLOB]``.

Files a folder's Markdown, text and code as records, one per chunk, and — run again —
keeps them in step with the folder (see :mod:`erstwhile.jobs.mining`). Shows a
progress bar on a terminal and ends with a summary: documents, chunks added,
superseded, unchanged and invalidated, the files skipped by reason, and those refused
(not a regular file, a name that is not UTF-8, too large, binary, unreadable) by name.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated

import typer

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace
from erstwhile.jobs.batches import DEFAULT_BATCH_SIZE
from erstwhile.jobs.embed import Progress
from erstwhile.jobs.folder import DEFAULT_MAX_BYTES
from erstwhile.jobs.mining import MineReport


def mine(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="The folder to mine.",
            show_default=False,
            exists=True,
            file_okay=False,
            dir_okay=True,
            readable=True,
        ),
    ],
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            "-i",
            metavar="GLOB",
            help="Mine only files matching this gitignore-style pattern; repeat for more.",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            "-x",
            metavar="GLOB",
            help="Skip files matching this gitignore-style pattern; repeat for more.",
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            metavar="NAME",
            help="origin.source of the records (default: the folder's absolute path).",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, metavar="N", help="Records per transaction.")
    ] = DEFAULT_BATCH_SIZE,
    max_bytes: Annotated[
        int,
        typer.Option("--max-bytes", min=1, metavar="N", help="Skip files larger than this."),
    ] = DEFAULT_MAX_BYTES,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Mine a folder's documents into records, and keep them in step with it.

    Markdown is chunked by heading and paragraph, code by top-level definition, text by
    paragraph; .gitignore files are honoured. Run it again after the folder changes:
    an unchanged chunk writes nothing, an edited one supersedes the old one, and the
    records of a vanished chunk or file are invalidated. A run that is interrupted
    is finished by running it again.
    """
    with open_memory(ctx) as memory:
        bar: AbstractContextManager[Progress | None] = (
            nullcontext(None) if as_json else output.progress_bar("mining")
        )
        with bar as progress:
            report = memory.mine(
                namespace, path, include=include or (), exclude=exclude or (), source=source,
                batch_size=batch_size, max_bytes=max_bytes, progress=progress,
            )  # fmt: skip
    if as_json:
        output.print_json(dataclasses.asdict(report))
        return
    output.print_warnings(report.warnings)
    console = output.console()
    for line in summary(report):
        console.print(line, markup=False)


def summary(report: MineReport) -> list[str]:
    """The human summary: what was mined and written, then what was skipped."""

    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'' if n == 1 else 's'}"

    lines = [
        f"mined {count(report.documents, 'document')} ({count(report.chunks, 'chunk')}) "
        f"from {report.source} into {report.namespace}: {report.added} added, "
        f"{report.superseded} superseded, {report.unchanged} unchanged, "
        f"{report.invalidated} invalidated"
    ]
    if report.removed_documents:
        lines.append(f"{count(report.removed_documents, 'document')} gone since the last mine")
    skipped = [f"{n} {reason.replace('_', ' ')}" for reason, n in report.skipped.items() if n]
    if skipped:
        lines.append("skipped: " + ", ".join(skipped))
    lines += [f"  {refusal.path}: {refusal.reason.replace('_', ' ')} ({refusal.detail})"
              for refusal in report.refused]  # fmt: skip
    return lines


def register(app: typer.Typer) -> None:
    app.command("mine", rich_help_panel="Write")(mine)

"""Embedding commands: ``embed`` fills a namespace's vector backlog, ``reindex``
re-embeds all of it, both now and in this process, with the ``--embedder`` given.

Records are embedded as they are written; ``embed`` is for those that were not (written
with ``--embedder none``, or while the provider failed). ``reindex`` is for after a
change of embedder model, or to rebuild every vector.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import typer

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace
from erstwhile.jobs.embed import JobReport, Progress
from erstwhile.memory import Memory


def _run(
    ctx: typer.Context,
    namespace: str,
    as_json: bool,
    *,
    job: Callable[[Memory, str, Progress | None], JobReport],
    verb: str,
) -> None:
    with open_memory(ctx, create=False) as memory:
        bar: AbstractContextManager[Progress | None] = nullcontext(None)
        if not as_json:
            embedder_id = memory.embedder_id(namespace)
            if embedder_id != "none":  # with none, the job's own error says so
                output.print_note(output.embedder_note(embedder_id))
                bar = output.progress_bar("embedding")
        with bar as progress:
            report = job(memory, namespace, progress)
    if as_json:
        output.print_json(dataclasses.asdict(report))
        return
    noun = "record" if report.embedded == 1 else "records"
    output.console().print(
        f"{verb} {report.embedded} {noun} with {report.embedder_id}; "
        f"backlog now {report.remaining}",
        markup=False,
    )


def embed(
    ctx: typer.Context, namespace: Namespace = "default", as_json: JsonOutput = False
) -> None:
    """Embed the records that have no vector yet for the current embedder."""
    _run(
        ctx,
        namespace,
        as_json,
        job=lambda memory, ns, progress: memory.embed(ns, progress=progress),
        verb="embedded",
    )


def reindex(
    ctx: typer.Context, namespace: Namespace = "default", as_json: JsonOutput = False
) -> None:
    """Re-embed every record of the namespace with the current embedder."""
    _run(
        ctx,
        namespace,
        as_json,
        job=lambda memory, ns, progress: memory.reindex(ns, progress=progress),
        verb="re-embedded",
    )


def register(app: typer.Typer) -> None:
    for command in (embed, reindex):
        app.command(rich_help_panel="Embed")(command)

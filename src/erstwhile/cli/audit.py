"""``erstwhile audit``: a namespace's health at a glance — its embedder and vector
backlog, its records by state, its extractor and extraction backlog, its latest jobs."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace

RECORD_STATES = ("records", "current", "future", "superseded", "invalidated", "deleted")


def audit(
    ctx: typer.Context, namespace: Namespace = "default", as_json: JsonOutput = False
) -> None:
    """A namespace's embedder, backlogs, records by state (current, future i.e. not yet
    valid, superseded, invalidated, deleted) and latest jobs; the same answer as REST's
    …/audit."""
    with open_memory(ctx, create=False) as memory:
        found = memory.audit(namespace)
    if as_json:
        output.print_json(found)
        return
    out = output.console()
    out.print(_summary(found))
    if found["jobs"]:
        out.print(_jobs(found["jobs"]))


def _summary(found: dict[str, Any]) -> Table:
    table = Table(title=f"namespace {found['namespace']}", show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("embedder", str(found["embedder"]))
    table.add_row("vector backlog", str(found["backlog"]))
    for state in RECORD_STATES:
        table.add_row(state, str(found["records"][state]))
    table.add_row("extractor", str(found["extractor"]))
    table.add_row("extraction backlog", str(found["extraction_backlog"]))
    return table


def _jobs(jobs: list[dict[str, Any]]) -> Table:
    table = Table(title="latest jobs")
    for column in ("id", "type", "state", "done", "updated", "provider", "error or stop"):
        table.add_column(column)
    for job in jobs:
        table.add_row(
            str(job["id"]), job["type"], job["state"], str(job["done"]), job["updated_at"],
            output.usage_line(job.get("usage")), job.get("error") or job.get("stopped") or "",
        )  # fmt: skip
    return table


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Read")(audit)

"""``erstwhile changes``: what was recorded between two instants (record time)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace
from erstwhile.domain.ledger import ChangesPage
from erstwhile.domain.time import format_instant
from erstwhile.service import DEFAULT_CHANGES


def changes(
    ctx: typer.Context,
    since: Annotated[
        str,
        typer.Option(
            "--since", metavar="TIME", help="From this instant (inclusive).", show_default=False
        ),
    ],
    until: Annotated[
        str | None,
        typer.Option(
            "--until", metavar="TIME", help="Until this instant (exclusive; default: now)."
        ),
    ] = None,
    after: Annotated[
        int | None,
        typer.Option("--after", metavar="SEQ", help="Continue after this change (`next`)."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", help="Changes per page.")
    ] = DEFAULT_CHANGES,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """What was added, revised, superseded, invalidated, deleted and verified in a
    period of record time, oldest first (e.g. what an agent learned overnight)."""
    with open_memory(ctx, create=False) as memory:
        page = memory.changes(namespace, since, until, after=after, limit=limit)
    if as_json:
        output.print_json(page.to_json())
        return
    output.console().print(_table(page))
    if page.next is not None:
        output.print_note(f"more: erstwhile changes --since {since} --after {page.next}")


def _table(page: ChangesPage) -> Table:
    table = Table(title=f"{len(page.changes)} changes")
    for column in ("at", "change", "id", "version", "actor", "content"):
        table.add_column(column)
    for change in page.changes:
        content = change.record.content if change.record is not None else ""
        table.add_row(
            format_instant(change.at), change.change, change.id,
            "" if change.version is None else str(change.version), change.actor,
            content[:60],
        )  # fmt: skip
    return table


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Read")(changes)

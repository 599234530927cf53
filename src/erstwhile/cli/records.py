"""Record commands: add, get, history, supersede, invalidate, delete, expire, verify."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.text import Text

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import (
    ExpireActionName,
    Filters,
    IfVersion,
    JsonOutput,
    Key,
    Kind,
    KnownAt,
    Meta,
    Namespace,
    RecordId,
    ScopeKey,
    ScopeKind,
    Source,
    Supersedes,
    Tags,
    ValidFrom,
    ValidTo,
    Wheres,
    parse_pairs,
    parse_wheres,
    record_fields,
)
from erstwhile.domain.records import UpsertResult, history_entry
from erstwhile.memory import Memory

IdArgument = Annotated[str, typer.Argument(help="Record id.", show_default=False)]
ContentArgument = Annotated[str, typer.Argument(help="What to remember.", show_default=False)]


def _store(ctx: typer.Context, as_json: bool, write: Callable[[Memory], UpsertResult]) -> None:
    """Runs one write and prints what it stored."""
    with open_memory(ctx) as memory:
        result = write(memory)
    if as_json:
        output.print_json(result.model_dump(mode="json"))
    else:
        output.print_written(result.ids, result.versions, result.warnings, verb="stored")


def add(
    ctx: typer.Context,
    content: ContentArgument,
    record_id: RecordId = None,
    key: Key = None,
    kind: Kind = None,
    tags: Tags = None,
    meta: Meta = None,
    valid_from: ValidFrom = None,
    valid_to: ValidTo = None,
    source: Source = None,
    supersedes: Supersedes = None,
    if_version: IfVersion = None,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Store a record; prints its id and version."""
    record = record_fields(
        content,
        record_id=record_id,
        key=key,
        kind=kind,
        tags=tags,
        meta=meta,
        valid_from=valid_from,
        valid_to=valid_to,
        source=source,
        supersedes=supersedes,
        if_version=if_version,
    )
    _store(ctx, as_json, lambda memory: memory.upsert(namespace, record))


def supersede(
    ctx: typer.Context,
    old_id: Annotated[str, typer.Argument(help="The record this one revises.", show_default=False)],
    content: ContentArgument,
    record_id: RecordId = None,
    key: Key = None,
    kind: Kind = None,
    tags: Tags = None,
    meta: Meta = None,
    valid_from: ValidFrom = None,
    valid_to: ValidTo = None,
    source: Source = None,
    supersedes: Supersedes = None,
    if_version: IfVersion = None,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Store a revision of OLD_ID, which ends where the new record begins.

    The old record is kept (see history); its key moves to the new record.
    """
    record = record_fields(
        content,
        record_id=record_id,
        key=key,
        kind=kind,
        tags=tags,
        meta=meta,
        valid_from=valid_from,
        valid_to=valid_to,
        source=source,
        supersedes=supersedes,
        if_version=if_version,
    )
    _store(ctx, as_json, lambda memory: memory.supersede(namespace, old_id, record))


def get(
    ctx: typer.Context,
    record_id: IdArgument,
    version: Annotated[
        int | None,
        typer.Option("--version", metavar="N", help="An earlier version (default: the latest)"),
    ] = None,
    known_at: KnownAt = None,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Show one record (soft-deleted and historical records included)."""
    with open_memory(ctx, create=False) as memory:
        record = memory.get(namespace, record_id, version, known_at=known_at)
    if as_json:
        output.print_json(record.to_json())
    else:
        output.console().print(output.record_panel(record))


def history(
    ctx: typer.Context,
    record_id: IdArgument,
    known_at: KnownAt = None,
    versions: Annotated[
        bool,
        typer.Option(
            "--versions",
            help="Every stored version of each record of the chain (in-place rewrites"
            " too), oldest first in record time.",
        ),
    ] = False,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Every version of the knowledge RECORD_ID belongs to, oldest first (with
    --versions or --known-at, each with when erstwhile held it: recorded → replaced)."""
    with open_memory(ctx, create=False) as memory:
        records = memory.history(namespace, record_id, known_at=known_at, versions=versions)
    if as_json:
        output.print_json({"versions": [history_entry(record) for record in records]})
    else:
        # when the ranges differ from "recorded → now": past versions, or the past
        shown = versions or known_at is not None
        output.console().print(output.records_table(records, record_time=shown))


def invalidate(
    ctx: typer.Context,
    record_id: IdArgument,
    at: Annotated[
        str | None,
        typer.Option("--at", metavar="TIME", help="When it stopped being true (default: now)"),
    ] = None,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """End a record's validity without a replacement."""
    with open_memory(ctx, create=False) as memory:
        version = memory.invalidate(namespace, record_id, at)
    if as_json:
        output.print_json({"ids": [record_id], "versions": [version], "warnings": []})
    else:
        output.print_written([record_id], [version], [], verb="invalidated")


def delete(
    ctx: typer.Context,
    record_id: IdArgument,
    hard: Annotated[
        bool,
        typer.Option("--hard", help="Remove every trace, all versions included. Irreversible."),
    ] = False,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Soft-delete a record (hidden from searches, still readable), or --hard remove it."""
    with open_memory(ctx, create=False) as memory:
        memory.delete(namespace, record_id, hard=hard)
    if as_json:
        output.print_json({"ids": [record_id], "hard": hard})
    else:
        output.console().print(
            Text.assemble(("hard-deleted " if hard else "deleted "), (record_id, "cyan"))
        )


def expire(
    ctx: typer.Context,
    action: Annotated[
        ExpireActionName,
        typer.Option("--action", help="What to do to each matching record.", show_default=False),
    ],
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows", min=1, metavar="N", help="Most records to change.", show_default=False
        ),
    ],
    kind: ScopeKind = None,
    tags: Tags = None,
    key: ScopeKey = None,
    filters: Filters = None,
    wheres: Wheres = None,
    every: Annotated[
        bool,
        typer.Option("--all", help="No scope: every record of the namespace (up to --max-rows)."),
    ] = False,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Invalidate or delete, in one bounded step, the records in scope (--kind, --tag,
    --key, --filter, --where; with none of them, --all)."""
    filter_ = parse_pairs(filters, "--filter")
    predicates = parse_wheres(wheres)
    with open_memory(ctx, create=False) as memory:
        affected = memory.expire(
            namespace,
            filter=filter_,
            predicates=predicates,
            action=action,
            max_rows=max_rows,
            kind=kind,
            tags=tags,
            key=key,
            all=every,
        )
    if as_json:
        output.print_json({"affected": affected})
    else:
        output.console().print(f"{affected} record{'' if affected == 1 else 's'} affected")


def verify(
    ctx: typer.Context,
    record_id: IdArgument,
    reviewer: Annotated[
        str,
        typer.Option(
            "--reviewer", metavar="NAME", help="Who checked the record.", show_default=False
        ),
    ],
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Mark a record as verified by a named reviewer."""
    with open_memory(ctx, create=False) as memory:
        version = memory.verify(namespace, record_id, reviewer)
    if as_json:
        output.print_json({"ids": [record_id], "versions": [version], "warnings": []})
    else:
        output.print_written([record_id], [version], [], verb="verified")


def register(app: typer.Typer) -> None:
    writes: list[Callable[..., None]] = [add, supersede, invalidate, delete, expire, verify]
    reads: list[Callable[..., None]] = [get, history]
    for command in writes:
        app.command(rich_help_panel="Write")(command)
    for command in reads:
        app.command(rich_help_panel="Read")(command)

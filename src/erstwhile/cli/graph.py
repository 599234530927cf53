"""Knowledge-graph commands: ``extract`` reads notes and mined records into the graph
with the ``--extractor`` given; ``entities`` lists entities and shows one.

    erstwhile --extractor heuristic extract
    erstwhile entities                     every entity (by name)
    erstwhile entities ada --kind person   names or aliases containing "ada"
    erstwhile entities show ent_…          one entity: relationships and mentions
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated

import typer
from rich.table import Table

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace
from erstwhile.domain.graph import Relationship
from erstwhile.domain.time import format_instant
from erstwhile.extraction.usage import MAX_CALLS, MAX_TOKENS
from erstwhile.jobs.embed import Progress


def extract(
    ctx: typer.Context,
    namespace: Namespace = "default",
    max_calls: Annotated[
        int | None,
        typer.Option(
            "--max-calls",
            min=1,
            max=MAX_CALLS,
            metavar="N",
            help="Stop before the provider call past N (default: extraction.max_calls).",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=1,
            max=MAX_TOKENS,
            metavar="N",
            help="Stop once the provider's reported tokens reach N "
            "(default: extraction.max_tokens).",
        ),
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Read current notes and mined records into the knowledge graph (and close the
    facts of records that were superseded or invalidated), within a budget if given;
    the next run carries on where a budget stopped it."""
    with open_memory(ctx) as memory:
        bar: AbstractContextManager[Progress | None] = nullcontext(None)
        if not as_json:
            bar = output.progress_bar("extracting")
        with bar as progress:
            report = memory.extract(namespace, progress=progress, max_calls=max_calls,
                                    max_tokens=max_tokens)  # fmt: skip
    if as_json:
        output.print_json(dataclasses.asdict(report))
        return
    noun = "record" if report.extracted == 1 else "records"
    out = output.console()
    out.print(
        f"extracted {report.extracted} {noun} with {report.extractor_id}; "
        f"closed {report.closed} facts; backlog now {report.remaining}",
        markup=False,
    )  # fmt: skip
    out.print(f"provider: {output.usage_line(report.usage)}", markup=False)
    if report.stopped:
        out.print(f"stopped: {report.stopped}", markup=False)


def _edge_row(edge: Relationship, names: dict[str, str]) -> list[str]:
    until = "" if edge.valid_to is None else format_instant(edge.valid_to)
    source = (edge.provenance or {}).get("record", "asserted")
    return [
        names.get(edge.subject, edge.subject), edge.predicate,
        names.get(edge.object, edge.object), format_instant(edge.valid_from), until, str(source),
    ]  # fmt: skip


def _show(ctx: typer.Context, namespace: str, entity_id: str, every: bool, as_json: bool) -> None:
    with open_memory(ctx) as memory:
        entity = memory.entity(namespace, entity_id)
        edges = memory.relationships(namespace, entity_id, include_expired=every)
        mentions = memory.mentions(namespace, entity_id)
        names = {entity_id: entity["name"]}
        for edge in edges:
            for end in (edge.subject, edge.object):
                if end not in names:
                    names[end] = memory.entity(namespace, end)["name"]
    if as_json:
        output.print_json({
            **entity,
            "relationships": [edge.to_json() for edge in edges],
            "mentions": [mention.to_json() for mention in mentions],
        })  # fmt: skip
        return
    out = output.console()
    aliases = ", ".join(entity["aliases"]) or "-"
    out.print(f"{entity['name']} ({entity['kind']}) {entity['id']}  aliases: {aliases}",
              markup=False)  # fmt: skip
    if entity["possibly_same_as"]:
        out.print("possibly the same as: " + ", ".join(entity["possibly_same_as"]), markup=False)
    table = Table("subject", "predicate", "object", "valid from", "valid to", "evidence",
                  title="relationships")  # fmt: skip
    for edge in edges:
        table.add_row(*_edge_row(edge, names))
    out.print(table)
    mentioned = Table("record", "spelling", title="mentioned by")
    for mention in mentions:
        mentioned.add_row(mention.record, mention.spelling)
    out.print(mentioned)


def entities(
    ctx: typer.Context,
    words: Annotated[
        list[str] | None,
        typer.Argument(metavar="[QUERY | show ID]", help="Part of a name, or: show ID."),
    ] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", metavar="KIND", help="Only this kind.")
    ] = None,
    include_expired: Annotated[
        bool, typer.Option("--include-expired", help="With show: retracted facts too.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Most to list.")] = 100,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """List the entities of the knowledge graph, or show one with `entities show ID`."""
    args = list(words or [])
    if args and args[0] == "show":
        if len(args) != 2:
            raise typer.BadParameter("write: erstwhile entities show ENTITY_ID", param_hint="ID")
        _show(ctx, namespace, args[1], include_expired, as_json)
        return
    if len(args) > 1:
        raise typer.BadParameter("give one QUERY (quote it if it has spaces)", param_hint="QUERY")
    with open_memory(ctx) as memory:
        found = memory.entities(namespace, args[0] if args else None, kind=kind, limit=limit)
    if as_json:
        output.print_json({"entities": [entity.to_json() for entity in found]})
        return
    if not found:
        output.console().print("no entities match", style="dim")
        return
    table = Table("id", "name", "kind", "aliases")
    for entity in found:
        table.add_row(entity.id, entity.name, entity.kind, ", ".join(entity.aliases))
    output.console().print(table)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Graph")(extract)
    app.command(rich_help_panel="Graph")(entities)

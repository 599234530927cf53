"""The search command: one CLI spelling of the §6 search request."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import (
    Filters,
    JsonOutput,
    MinTrust,
    Namespace,
    RankingName,
    ScopeKey,
    ScopeKind,
    Tags,
    Wheres,
    parse_pairs,
    parse_wheres,
)
from erstwhile.domain.search import SearchRequest, between_option
from erstwhile.domain.validation import parse_model

Instant = str | None
_TIME = "Time"
_SCOPE = "Scope"


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    as_of: Annotated[
        Instant,
        typer.Option(
            "--as-of", metavar="TIME", help="What was true at this instant.", rich_help_panel=_TIME
        ),
    ] = None,
    from_: Annotated[
        Instant,
        typer.Option(
            "--from",
            metavar="TIME",
            help="Start of a validity window (with --until).",
            rich_help_panel=_TIME,
        ),
    ] = None,
    until: Annotated[
        Instant,
        typer.Option(
            "--until", metavar="TIME", help="End of the window, exclusive.", rich_help_panel=_TIME
        ),
    ] = None,
    known_at: Annotated[
        Instant,
        typer.Option(
            "--known-at",
            metavar="TIME",
            help="The answer erstwhile would have given at this instant (record time).",
            rich_help_panel=_TIME,
        ),
    ] = None,
    include_historical: Annotated[
        bool,
        typer.Option(
            "--include-historical",
            help="Every version ever: superseded, ended, future and deleted too.",
            rich_help_panel=_TIME,
        ),
    ] = False,
    tags: Tags = None,
    kind: ScopeKind = None,
    key: ScopeKey = None,
    filters: Filters = None,
    wheres: Wheres = None,
    min_trust: Annotated[
        MinTrust | None,
        typer.Option(
            "--min-trust", help="verified = reviewed records only.", rich_help_panel=_SCOPE
        ),
    ] = None,
    created_after: Annotated[
        Instant,
        typer.Option(
            "--created-after",
            metavar="TIME",
            help="Recorded after this instant.",
            rich_help_panel=_SCOPE,
        ),
    ] = None,
    created_before: Annotated[
        Instant,
        typer.Option(
            "--created-before",
            metavar="TIME",
            help="Recorded before this instant.",
            rich_help_panel=_SCOPE,
        ),
    ] = None,
    top_k: Annotated[
        int, typer.Option("--top-k", "-k", min=1, metavar="N", help="Most hits to return.")
    ] = 10,
    ranking: Annotated[
        RankingName,
        ScopeKey,
        ScopeKind,
        typer.Option("--ranking", help="lexical (BM25), semantic, hybrid, or auto."),
    ] = "auto",
    ids_only: Annotated[
        bool, typer.Option("--ids-only", help="Only ids (and scores in JSON).")
    ] = False,
    expand: Annotated[
        bool,
        typer.Option(
            "--expand", help="Append records the knowledge graph relates to the hits (1 hop)."
        ),
    ] = False,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Search memories: what is true now (default), --as-of a date, or over a window."""
    options: dict[str, Any] = {
        "top_k": top_k,
        "ranking": ranking,
        "tags": tags or [],
        "filter": parse_pairs(filters, "--filter"),
        "predicates": parse_wheres(wheres),
        "ids_only": ids_only,
        "include_historical": include_historical,
        "expand": expand,
    }
    given = {
        "as_of": as_of,
        "known_at": known_at,
        "kind": kind,
        "key": key,
        "min_trust": min_trust,
        "created_after": created_after,
        "created_before": created_before,
    }
    options.update({name: value for name, value in given.items() if value is not None})
    between = between_option(from_, until)
    if between is not None:
        options["between"] = between
    # Parsed before the store opens, so a mistake in the options is reported as such
    # even where there is no store yet.
    request = parse_model(SearchRequest, {"query": query, **options})
    with open_memory(ctx, create=False) as memory:
        result = memory.service.search(namespace, request)
        embedder_id = memory.embedder_id(namespace)
    output.print_search(result, embedder_id=embedder_id, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Read")(search)

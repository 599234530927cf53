"""Options several commands share, and the parsers for ``k=v`` and ``--where`` syntax.

Values are passed to the domain as given (instants as text, metadata as strings):
the domain validates them and its errors name the field. Only syntax that exists
on the command line alone (``k=v``, ``priority>=3``) is checked here, and a mistake
is reported as a usage error naming the option (exit code 2).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import typer

Namespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        metavar="NAME",
        envvar="ERSTWHILE_NAMESPACE",
        help="Memory space to use.",
    ),
]
KnownAt = Annotated[
    str | None,
    typer.Option(
        "--known-at",
        metavar="TIME",
        help="As erstwhile knew it at this instant (record time), before later writes.",
    ),
]


def _or_global_json(ctx: typer.Context, value: bool) -> bool:
    """A command's own ``--json``, or the global one given before the command."""
    return value or bool(getattr(ctx.find_root().obj, "json", False))


JsonOutput = Annotated[
    bool,
    typer.Option(
        "--json",
        callback=_or_global_json,
        help="Print stable machine-readable JSON instead of tables.",
    ),
]

# -- record fields (add, supersede) ----------------------------------------------
RecordId = Annotated[
    str | None,
    typer.Option("--id", metavar="ID", help="Record id; omitted = a new time-ordered UUID."),
]
Key = Annotated[
    str | None,
    typer.Option(
        "--key", metavar="KEY", help="Human handle, unique among current records (e.g. user.car)."
    ),
]
Kind = Annotated[
    str | None,
    typer.Option(
        "--kind", metavar="KIND", help="Source kind: note, fact, decision, ... (default: note)"
    ),
]
Tags = Annotated[
    list[str] | None, typer.Option("--tag", "-t", metavar="TAG", help="A tag; repeat for more.")
]
Meta = Annotated[
    list[str] | None,
    typer.Option("--meta", "-m", metavar="K=V", help="Metadata as k=v; repeat for more."),
]
ValidFrom = Annotated[
    str | None,
    typer.Option(
        "--valid-from",
        metavar="TIME",
        help="When it became true (RFC 3339 or YYYY-MM-DD) (default: now)",
    ),
]
ValidTo = Annotated[
    str | None,
    typer.Option("--valid-to", metavar="TIME", help="When it stopped being true (exclusive)."),
]
Source = Annotated[
    str | None, typer.Option("--source", metavar="TEXT", help="Opaque provenance handle.")
]
Supersedes = Annotated[
    list[str] | None,
    typer.Option(
        "--supersedes", metavar="ID", help="Id of a record this one revises; repeat for more."
    ),
]
IfVersion = Annotated[
    int | None,
    typer.Option(
        "--if-version", metavar="N", help="Write only if the id is at this version (0 = new)."
    ),
]

# -- scope (search, expire) --------------------------------------------------------
Filters = Annotated[
    list[str] | None,
    typer.Option(
        "--filter", "-f", metavar="K=V", help="Exact metadata match k=v; repeat to AND more."
    ),
]
Wheres = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        "-w",
        metavar="EXPR",
        help="Typed metadata condition: 'priority>=3', 'n<10', 'team!=ops', "
        "'status in open,blocked'. >, >=, <, <= compare numbers.",
    ),
]

ScopeKind = Annotated[
    str | None,
    typer.Option("--kind", metavar="KIND", help="Only this kind.", rich_help_panel="Scope"),
]
ScopeKey = Annotated[
    str | None,
    typer.Option(
        "--key", metavar="KEY", help="Only the record with this key.", rich_help_panel="Scope"
    ),
]

MinTrust = Literal["unverified", "verified"]
RankingName = Literal["auto", "lexical", "semantic", "hybrid"]
ExpireActionName = Literal["invalidate", "soft_delete", "hard_delete"]
EmbedderName = Literal["auto", "local", "hash", "openai", "ollama", "command", "none"]
ExtractorName = Literal["none", "heuristic", "command", "http"]


def parse_pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; the value may itself contain ``=``."""
    pairs: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        if key in pairs:
            raise typer.BadParameter(f"key {key!r} is given twice", param_hint=option)
        pairs[key] = value
    return pairs


_COMPARISON = re.compile(
    r"^\s*(?P<key>[^\s<>=!]+)\s*(?P<op>>=|<=|!=|==|=|>|<)\s*(?P<value>.*?)\s*$"
)
_MEMBERSHIP = re.compile(r"^\s*(?P<key>[^\s<>=!]+)\s+in\s+(?P<values>.+?)\s*$", re.IGNORECASE)
_OPS = {">=": "GTE", "<=": "LTE", "!=": "NEQ", "==": "EQ", "=": "EQ", ">": "GT", "<": "LT"}


def parse_where(expression: str, option: str = "--where") -> dict[str, Any]:
    """``'priority>=3'`` or ``'status in a,b'`` as a predicate ``{key, op, values}``."""
    membership = _MEMBERSHIP.match(expression)
    if membership:
        values = [v.strip() for v in membership["values"].split(",")]
        if not all(values):
            raise typer.BadParameter(
                f"{expression!r}: 'in' takes a comma-separated list of non-empty values",
                param_hint=option,
            )
        return {"key": membership["key"], "op": "IN", "values": values}
    comparison = _COMPARISON.match(expression)
    if comparison is None or not comparison["value"] or comparison["value"][0] in "<>=!":
        raise typer.BadParameter(
            f"cannot read {expression!r}; write KEY OP VALUE with OP one of "
            ">=, <=, !=, =, >, < (e.g. 'priority>=3') or 'KEY in A,B,C'",
            param_hint=option,
        )
    return {
        "key": comparison["key"],
        "op": _OPS[comparison["op"]],
        "values": [comparison["value"]],
    }


def parse_wheres(expressions: list[str] | None, option: str = "--where") -> list[dict[str, Any]]:
    return [parse_where(expression, option) for expression in expressions or []]


def record_fields(
    content: str,
    *,
    record_id: str | None,
    key: str | None,
    kind: str | None,
    tags: list[str] | None,
    meta: list[str] | None,
    valid_from: str | None,
    valid_to: str | None,
    source: str | None,
    supersedes: list[str] | None,
    if_version: int | None,
) -> dict[str, Any]:
    """The record the options describe; options not given are left to the domain."""
    given: dict[str, Any] = {
        "id": record_id,
        "key": key,
        "kind": kind,
        "tags": tags,
        "metadata": parse_pairs(meta, "--meta") or None,
        "valid_from": valid_from,
        "valid_to": valid_to,
        "source": source,
        "supersedes": supersedes,
        "if_version": if_version,
    }
    return {"content": content, **{k: v for k, v in given.items() if v is not None}}

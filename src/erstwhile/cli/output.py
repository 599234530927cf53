"""Rendering: rich tables for people, plain JSON for programs, one line per problem.

Human output goes to stdout through rich. ``--json`` output is ``json.dumps`` of the
domain's own ``to_json`` forms, with no markup. Warnings and errors go to stderr as
single unwrapped lines (coloured only on a terminal), so they can be grepped.

No stored or echoed text reaches a terminal as a control character: human output
shows each C0/C1 control (but newline and tab) and DEL as a visible escape such as
``\\x1b`` (:func:`terminal_safe`), through the console of :func:`console` and in every
line printed here; JSON output escapes them as JSON does (``\\u001b``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from erstwhile.domain.errors import ErstwhileError
from erstwhile.domain.records import Record
from erstwhile.domain.search import SearchResult

PIPE_WIDTH = 140
"""Table width when stdout is not a terminal and ``COLUMNS`` is unset (rich says 80)."""


#: C0 controls but newline and tab, DEL and C1 controls: what a terminal may act on.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What JSON text may still hold raw (json.dumps escapes C0 already): DEL and C1.
_JSON_CONTROLS = re.compile("[\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character a terminal could act on (an escape
    sequence, a bell, a carriage return) shown as its ``\\xNN`` escape instead."""
    return _CONTROLS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


class _SafeConsole(Console):
    """A console whose every string (a table cell, a printed line) is
    :func:`terminal_safe` before rich lays it out."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(terminal_safe(text), **options)


def safe_text(text: str, style: str = "") -> Text:
    """A rich ``Text`` of a value for people (rich lays a ``Text`` out as given)."""
    return Text(terminal_safe(text), style=style)


def console() -> Console:
    """A console on the current stdout (made per call, so test runners can swap it)."""
    out = _SafeConsole(highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = PIPE_WIDTH
    return out


def print_json(data: Any) -> None:
    """``data`` as one line of JSON; DEL and C1 controls escaped too (``\\u009b``),
    which is the same JSON value."""
    text = json.dumps(data, ensure_ascii=False)
    typer.echo(_JSON_CONTROLS.sub(lambda match: f"\\u{ord(match.group()):04x}", text))


def print_warnings(warnings: Iterable[str]) -> None:
    for warning in warnings:
        typer.secho(terminal_safe(f"warning: {warning}"), err=True, fg="yellow")


def print_error(error: ErstwhileError) -> None:
    typer.secho(terminal_safe(f"error: {error.code}: {error.message}"), err=True, fg="red")


def print_note(text: str) -> None:
    """A dim status line on stderr (which embedder, which ranking), never on stdout."""
    typer.secho(terminal_safe(text), err=True, dim=True)


def embedder_note(embedder_id: str, ranking: str | None = None) -> str:
    """``embedder: hash:feature-hash-v2:256 · ranking: hybrid``."""
    note = f"embedder: {embedder_id}"
    return f"{note} · ranking: {ranking}" if ranking else note


# -- instants and status ---------------------------------------------------------


def usage_line(usage: dict[str, Any] | None) -> str:
    """An extract job's provider figures in one line ("-" for a job without any):
    calls, retries, failed and unreadable answers, tokens (unknown when the provider
    reported none) and time in the provider."""
    if not usage:
        return "-"
    tokens_in, tokens_out = usage.get("tokens_in"), usage.get("tokens_out")
    tokens = (
        "tokens unknown"
        if tokens_in is None and tokens_out is None
        else f"tokens {tokens_in or 0} in / {tokens_out or 0} out"
    )
    return (
        f"{usage['calls']} calls ({usage['retries']} retried, {usage['failed']} failed, "
        f"{usage['unreadable']} unreadable), {tokens}, {usage['provider_ms'] / 1000:.2f} s"
    )


def moment(value: datetime | None) -> str:
    """A compact, copy-pasteable instant: a date at midnight UTC, else to the second."""
    if value is None:
        return ""
    value = value.astimezone(UTC)
    if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
        return value.strftime("%Y-%m-%d")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def validity(record: Record) -> str:
    """The half-open validity range ``from → to`` (``open`` when it has no end)."""
    if record.valid_from is None:
        return ""
    end = moment(record.valid_to) if record.valid_to else "open"
    return f"{moment(record.valid_from)} → {end}"


def status(record: Record, now: datetime | None = None) -> str:
    """Why a record is or is not current: deleted, superseded, ended, future, current."""
    now = now or datetime.now(UTC)
    if record.deleted_at is not None:
        return "deleted"
    if record.superseded_by:
        return "superseded"
    if record.valid_to is not None and record.valid_to <= now:
        return "ended"
    if record.valid_from is not None and record.valid_from > now:
        return "future"
    return "current"


# -- tables ------------------------------------------------------------------------


def _id_column(table: Table, ids: Sequence[str], room_beside: int) -> None:
    """Ids stay whole when the console leaves ``room_beside`` columns for the rest, and fold
    (never crop) otherwise: an id cut short is useless."""
    whole = console().width - max(map(len, ids), default=2) >= room_beside
    table.add_column("id", style="cyan", overflow="fold", no_wrap=whole)


def known(record: Record) -> str:
    """The record-time range ``recorded → replaced`` (``now`` while it is current)."""
    if record.updated_at is None:
        return ""
    end = moment(record.known_until) if record.known_until else "now"
    return f"{moment(record.updated_at)} → {end}"


def records_table(
    records: Sequence[Record], title: str | None = None, *, record_time: bool = False
) -> Table:
    """Records in the order given: id, content, validity, key, tags, version, status
    (``record_time``: and when erstwhile held each version, ``recorded → replaced``)."""
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    _id_column(table, [record.id for record in records], room_beside=76)
    table.add_column("content", ratio=1, min_width=12)
    table.add_column("valid")
    table.add_column("key", style="magenta")
    table.add_column("tags")
    table.add_column("v", justify="right")
    table.add_column("status")
    if record_time:
        table.add_column("known")
    for record in records:
        cells: list[str | Text] = [
            record.id,
            safe_text(record.content),
            validity(record),
            safe_text(record.key or ""),
            safe_text(", ".join(record.tags)),
            str(record.version or ""),
            status(record),
        ]
        table.add_row(*cells, *([known(record)] if record_time else []))
    return table


LANE_LETTERS = {"lexical": "L", "semantic": "S", "graph": "G"}


def lanes(signals: dict[str, Any]) -> str:
    """The lanes that found a hit, one letter each: L lexical, S semantic, G graph."""
    return "".join(letter for lane, letter in LANE_LETTERS.items() if lane in signals)


def search_table(result: SearchResult, title: str | None = None) -> Table:
    """Hits in rank order: rank, score, lanes (L lexical, S semantic, G graph), id,
    content, validity."""
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("lanes")
    _id_column(table, result.ids(), room_beside=56)
    table.add_column("content", ratio=1, min_width=12)
    table.add_column("valid")
    for rank, hit in enumerate(result.hits, start=1):
        table.add_row(
            str(rank),
            f"{hit.score:.4g}",
            lanes(hit.signals),
            hit.record.id,
            safe_text(hit.record.content),
            validity(hit.record),
        )
    return table


def record_panel(record: Record) -> Panel:
    """One record, every field that is set."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    rows: list[tuple[str, str | None]] = [
        ("content", record.content),
        ("namespace", record.namespace),
        ("key", record.key),
        ("kind", record.kind),
        ("tags", ", ".join(record.tags) or None),
        ("metadata", ", ".join(f"{k}={v}" for k, v in record.metadata.items()) or None),
        ("trust", record.trust),
        ("valid", validity(record)),
        ("status", status(record)),
        ("recorded", moment(record.created_at)),
        ("updated", moment(record.updated_at)),
        ("deleted", moment(record.deleted_at) or None),
        ("source", record.source),
        ("supersedes", ", ".join(record.supersedes) or None),
        ("superseded by", record.superseded_by),
        ("version", str(record.version) if record.version else None),
    ]
    for name, value in rows:
        if value:
            grid.add_row(name, safe_text(value))
    return Panel(grid, title=safe_text(record.id, "cyan"), title_align="left", expand=False)


# -- command results ------------------------------------------------------------------


def print_search(result: SearchResult, *, embedder_id: str, as_json: bool) -> None:
    """The hits; in human mode also the embedder and ranking used, and warnings, on
    stderr. JSON output is the result alone (its warnings are inside it)."""
    if as_json:
        print_json(result.to_json())
        return
    if result.ids_only:
        for record_id in result.ids():
            typer.echo(terminal_safe(record_id))
    elif result.hits:
        console().print(search_table(result))
    else:
        console().print("no records match", style="dim")
    print_note(embedder_note(embedder_id, result.ranking.value))
    # The service's warnings already say how many records had no vector, and why.
    print_warnings(result.warnings)


def print_written(ids: list[str], versions: list[int], warnings: list[str], *, verb: str) -> None:
    for record_id, version in zip(ids, versions, strict=True):
        line = Text.assemble(f"{verb} ", (terminal_safe(record_id), "cyan"), f" version {version}")
        console().print(line)
    print_warnings(warnings)


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr (drawn only on a terminal); yields the
    ``progress(done, total)`` callback a long job calls as it goes."""
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    task = bar.add_task(description, total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield advance

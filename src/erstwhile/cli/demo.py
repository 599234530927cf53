"""``erstwhile demo``: bitemporal memory in five steps, on a throwaway database."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.memory import Memory

QUESTION = "Where does Alice work?"
KEY = "alice.employer"


def demo(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Keep the demo in this database (in a new demo-… namespace) instead of a "
            "temporary one. The global --db and ERSTWHILE_DB are not used.",
        ),
    ] = None,
) -> None:
    """Show what erstwhile does, offline: store a fact, revise it, ask now and then."""
    if db is not None:
        _run(ctx, db, f"demo-{uuid.uuid4().hex[:8]}")
        return
    with tempfile.TemporaryDirectory(prefix="erstwhile-demo-") as tmp:
        _run(ctx, str(Path(tmp) / "demo.db"), "demo")


def _run(ctx: typer.Context, db: str, namespace: str) -> None:
    out = output.console()
    out.print(
        Panel(
            Text.assemble(
                "erstwhile keeps every memory with ",
                ("when it was true", "bold"),
                " (validity) and ",
                ("when it was recorded", "bold"),
                ". Revising a fact never erases the old one: it closes it.\n",
                (f"database: {db}   namespace: {namespace}", "dim"),
            ),
            title="erstwhile demo",
            title_align="left",
        )
    )
    with open_memory(ctx, db) as memory:
        _steps(memory, namespace)


def _step(number: int, title: str, explanation: str) -> None:
    out = output.console()
    out.print()
    out.print(Rule(f"[bold]{number}. {title}", align="left"))
    out.print(Text(explanation, style="dim"))


def _steps(memory: Memory, namespace: str) -> None:
    out = output.console()

    _step(
        1,
        "Store a fact",
        f"'Alice works at Acme', true since 2023-01-01, with the key {KEY} as its handle.",
    )
    acme = memory.upsert(
        namespace,
        {"content": "Alice works at Acme", "key": KEY, "kind": "fact", "valid_from": "2023-01-01"},
    ).ids[0]
    out.print(output.records_table([memory.get(namespace, acme)]))

    _step(
        2,
        "Revise it",
        "Alice moved to Globex on 2024-06-01. Superseding closes the Acme record at that "
        "instant and hands the key to the new record; the Acme record is kept.",
    )
    globex = memory.supersede(
        namespace,
        acme,
        {"content": "Alice works at Globex", "kind": "fact", "valid_from": "2024-06-01"},
    ).ids[0]
    out.print(output.records_table([memory.get(namespace, acme), memory.get(namespace, globex)]))

    _step(3, f"Ask now: {QUESTION!r}", "A search sees what is true now: only Globex.")
    now = memory.search(namespace, QUESTION)
    out.print(output.search_table(now))

    _step(
        4,
        f"Ask as of 2023-09-01: {QUESTION!r}",
        "The same question about the past (--as-of 2023-09-01) answers with what was true "
        "then: Acme.",
    )
    then = memory.search(namespace, QUESTION, as_of="2023-09-01")
    out.print(output.search_table(then))

    _step(5, "History", "Every version of the knowledge, oldest first.")
    out.print(output.records_table(memory.history(namespace, globex)))

    notes = sorted(set(now.warnings + then.warnings))
    if notes:
        out.print()
        for note in notes:
            out.print(Text(f"note: {note}", style="yellow"))
    out.print()
    out.print(
        Text.assemble(
            "Try it: ",
            (
                'erstwhile add "Alice works at Acme" --key alice.employer --valid-from 2023-01-01',
                "bold",
            ),
            ", then ",
            ('erstwhile search "Alice" --as-of 2023-09-01', "bold"),
            ".",
        )
    )


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Learn")(demo)

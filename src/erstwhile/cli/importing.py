"""The import command: ``erstwhile import FILE [--format jsonl|conversation] [-n NS]``.

``jsonl``: one record object per line. ``conversation``: a JSON transcript — an object
``{"id"?, "sessions": [...]}``, a list of sessions, or a list of such objects (several
conversations). The format is taken from the file name when not given: ``.jsonl`` and
``.ndjson`` are JSON Lines, ``.json`` is a conversation. A file ``erstwhile export`` wrote
(its first line says so) is restored as it was, into the namespaces it names (see
:mod:`erstwhile.backups`). Everything is validated before the first write; see
:mod:`erstwhile.jobs.importing` for what is atomic.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from erstwhile import backups
from erstwhile.cli import output
from erstwhile.cli.context import open_memory
from erstwhile.cli.options import JsonOutput, Namespace
from erstwhile.domain.errors import InvalidInput
from erstwhile.jobs.batches import Progress
from erstwhile.jobs.files import kind_of, shown
from erstwhile.jobs.importing import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TEMPLATE,
    ImportReport,
    conversation_records,
    import_conversation,
    import_jsonl,
)
from erstwhile.memory import Memory

FormatName = Literal["auto", "jsonl", "conversation"]
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "conversation"}


def _format_of(path: Path, given: FormatName) -> str:
    if given != "auto":
        return given
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise InvalidInput(
            f"cannot tell the format of {path.name} from its name; "
            "pass --format jsonl or --format conversation"
        )
    return found


def _conversations(path: Path, conversation: str | None) -> list[tuple[str | None, Any]]:
    """(conversation id, sessions) for each conversation the file holds."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InvalidInput(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path.name} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InvalidInput(
            f"{path.name} is not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})"
        ) from None
    if isinstance(data, dict):
        items = [data]
    elif (
        isinstance(data, list)
        and data
        and all(isinstance(i, dict) and "sessions" in i for i in data)
    ):
        items = data
    elif isinstance(data, list):
        items = [{"sessions": data}]
    else:
        raise InvalidInput(
            f"{path.name} must hold a conversation object with sessions, or a list of sessions"
        )
    if conversation is not None and len(items) > 1:
        raise InvalidInput(
            f"--conversation names one conversation, but {path.name} holds {len(items)}"
        )
    found = []
    for index, item in enumerate(items):
        if "sessions" not in item:
            raise InvalidInput(f"{path.name}: conversation [{index}] has no sessions list")
        ident = item.get("id", item.get("conversation"))
        if conversation is not None:
            ident = conversation
        found.append((None if ident is None else str(ident), item["sessions"]))
    return found


def import_(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            help="A .jsonl file of records, or a .json conversation transcript.",
            show_default=False,
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    format_: Annotated[
        FormatName,
        typer.Option("--format", help="jsonl or conversation (default: from the file name)."),
    ] = "auto",
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            metavar="ID",
            help="Conversation id (records get stable ids, so a re-import revises them).",
        ),
    ] = None,
    template: Annotated[
        str,
        typer.Option(
            "--template",
            metavar="TEXT",
            help="Content of a turn's record, from {speaker} {text} {date} {time} {session} "
            "{conversation}.",
        ),
    ] = DEFAULT_TEMPLATE,
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", min=1, metavar="N", help="Records per transaction."),
    ] = DEFAULT_BATCH_SIZE,
    namespace: Namespace = "default",
    as_json: JsonOutput = False,
) -> None:
    """Import records from JSON Lines, or the turns of a conversation transcript.

    Every line is checked first: a bad line is reported by number and nothing is
    written. Records are then written in batches, each one transaction.
    """
    found = os.stat(file)
    if not stat.S_ISREG(found.st_mode):  # a FIFO's second open would wait for a writer
        raise InvalidInput(
            f"{shown(str(file))} is {kind_of(found.st_mode)}; import reads a regular "
            "file, twice (every line checked before any is written): save the stream to a "
            "file first"
        )
    if format_ == "auto" and backups.is_export(file):
        _restore(ctx, file, as_json)
        return
    kind = _format_of(file, format_)
    if kind == "jsonl" and (conversation is not None or template != DEFAULT_TEMPLATE):
        raise InvalidInput("--conversation and --template apply to --format conversation only")
    conversations = _conversations(file, conversation) if kind == "conversation" else []
    for ident, sessions in conversations:  # all of them are checked before any is written
        for _ in conversation_records(sessions, conversation=ident, template=template):
            pass
    with open_memory(ctx) as memory:
        bar: AbstractContextManager[Progress | None] = (
            nullcontext(None) if as_json else output.progress_bar("importing")
        )
        with bar as progress:
            reports = _run(memory, namespace, file, kind, conversations, template,
                           batch_size, progress)  # fmt: skip
    records = sum(r.records for r in reports)
    warnings = [w for r in reports for w in r.warnings]
    if as_json:
        output.print_json(
            {
                "namespace": namespace,
                "format": kind,
                "records": records,
                "batches": sum(r.batches for r in reports),
                "conversations": [r.source for r in reports] if kind == "conversation" else [],
                "ids": [i for r in reports for i in r.ids],
                "warnings": warnings,
            }
        )
        return
    output.print_warnings(dict.fromkeys(warnings))
    noun = "record" if records == 1 else "records"
    output.console().print(
        f"imported {records} {noun} from {file.name} into {namespace} ({kind})", markup=False
    )


def _restore(ctx: typer.Context, file: Path, as_json: bool) -> None:
    """An export (``erstwhile export``) restores into the namespaces it names."""
    with open_memory(ctx) as memory:
        report = backups.import_export(memory, file)
    if as_json:
        output.print_json({"format": "export", **dataclasses.asdict(report)})
        return
    output.print_warnings(dict.fromkeys(report.warnings))
    output.console().print(
        f"restored {report.records} records ({report.versions} versions) from {file.name} "
        f"into {', '.join(report.namespaces) or 'nothing'} (export)",
        markup=False,
    )


def _run(
    memory: Memory,
    namespace: str,
    file: Path,
    kind: str,
    conversations: list[tuple[str | None, Any]],
    template: str,
    batch_size: int,
    progress: Progress | None,
) -> list[ImportReport]:
    if kind == "jsonl":
        return [import_jsonl(memory, namespace, file, batch_size=batch_size, progress=progress)]
    reports = []
    for ident, sessions in conversations:
        report = import_conversation(
            memory, namespace, sessions, conversation=ident, template=template,
            batch_size=batch_size, progress=progress,
        )  # fmt: skip
        reports.append(report)
    return reports


def register(app: typer.Typer) -> None:
    app.command("import", rich_help_panel="Write")(import_)

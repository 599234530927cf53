"""``erstwhile mine``: a folder filed as records, its summary, and re-mining."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]
REPORT_KEYS = [
    "job_id", "namespace", "source", "documents", "chunks", "added", "superseded",
    "unchanged", "invalidated", "removed_documents", "skipped", "batches", "warnings",
    "refused",
]  # fmt: skip


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "guide.md").write_text(
        "# Guide\n\nHow to start the engine.\n\n## Parking\n\nLeave it in the garage.\n"
    )
    (folder / "sub" / "todo.txt").write_text("Buy oil.\n")
    (folder / "scratch.log").write_text("not mined: unknown type\n")
    (folder / ".gitignore").write_text("drafts/\n")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "wip.md").write_text("# Draft\n")
    return folder


def test_mine_files_a_folder_and_re_mining_writes_only_changes(
    cli: Cli, tmp_path: Path, text: Plain
) -> None:
    folder = notes(tmp_path)
    report = cli.json("mine", str(folder), "-n", "car")
    assert list(report) == REPORT_KEYS
    assert (report["documents"], report["chunks"], report["added"]) == (2, 3, 3)
    assert report["skipped"] == {"ignored": 2, "unsupported": 1, "too_large": 0, "binary": 0,
                                 "unreadable": 0, "not_regular": 0, "bad_name": 0}  # fmt: skip
    hits = cli.json("search", "garage", "-n", "car", "--ranking", "lexical")["hits"]
    record = hits[0]["record"]
    assert record["content"] == "Guide > Parking\n\nLeave it in the garage."
    assert record["kind"] == "document"
    assert record["origin"]["document"] == "guide.md"
    assert record["origin"]["source"] == str(folder.resolve())
    assert record["metadata"] == {"document": "guide.md", "section": "Guide > Parking"}

    (folder / "guide.md").write_text(
        "# Guide\n\nHow to start the engine.\n\n## Parking\n\nLeave it in the big garage.\n"
    )
    (folder / "sub" / "todo.txt").unlink()
    summary = text(cli.ok("mine", str(folder), "-n", "car").stdout)
    assert summary == (
        f"mined 1 document (2 chunks) from {folder.resolve()} into car: 0 added, "
        "1 superseded, 1 unchanged, 1 invalidated 1 document gone since the last mine "
        "skipped: 2 ignored, 1 unsupported"
    )
    old, new = cli.json("history", record["id"], "-n", "car")["versions"]
    assert (old["superseded_by"], new["supersedes"]) == (new["id"], [old["id"]])


def test_mine_options_and_errors(cli: Cli, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    only = cli.json("mine", str(folder), "-n", "x", "--include", "*.md", "--source", "notes")
    assert (only["documents"], only["source"]) == (1, "notes")
    skipped = cli.json("mine", str(folder), "-n", "y", "--exclude", "sub/", "--max-bytes", "10")
    assert (skipped["documents"], skipped["skipped"]["too_large"]) == (0, 1)
    cli.fails(2, "mine", str(folder / "guide.md"))  # not a folder
    cli.fails(2, "mine", str(tmp_path / "missing"))
    result = cli.fails(2, "mine", str(folder), "--include", " ")
    assert "error: erstwhile.input.invalid: include" in result.stderr


def test_refused_files_are_named_in_the_summary(cli: Cli, tmp_path: Path, text: Plain) -> None:
    folder = notes(tmp_path)
    os.mkfifo(folder / "pipe.md")  # a blocking open would hang the command for good
    Path(os.fsdecode(os.fsencode(folder) + b"/caf\xe9.md")).write_text("latin-1 name")
    summary = text(cli.ok("mine", str(folder), "-n", "z").stdout)
    assert summary.endswith(
        "skipped: 2 ignored, 1 unsupported, 1 not regular, 1 bad name "
        "caf\\xe9.md: bad name (the name is not UTF-8, so it cannot be stored) "
        "pipe.md: not regular (a FIFO)"
    ), summary

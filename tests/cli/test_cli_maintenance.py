"""``erstwhile backup``, ``export``, ``import`` of an export and ``check`` as a user runs them."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from erstwhile.store.sql.rows import ROW_FIELDS

from .conftest import Cli


def test_export_import_round_trip_and_check(cli: Cli, tmp_path: Path) -> None:
    old = cli.add("Alice works at Acme", "--key", "alice.employer", "--valid-from", "2023-01-01")
    cli.ok("supersede", old, "Alice works at Globex", "--valid-from", "2024-06-01")
    exported = cli.ok("export").stdout
    assert json.loads(exported.splitlines()[0]) == {
        "erstwhile": "export", "format": 2, "graph": "whole"}  # fmt: skip
    told = cli.ok("export", "--graph", "told").stdout.splitlines()
    assert json.loads(told[0])["graph"] == "told" and told[1:] == exported.splitlines()[1:]
    assert "graph must be one of whole, told" in cli.fails(2, "export", "--graph", "half").stderr
    path = tmp_path / "memory.jsonl"
    cli.ok("export", "--output", str(path))
    assert path.read_text(encoding="utf-8") == exported

    other = Cli(tmp_path / "other.db")
    restored = other.json("import", str(path))
    assert restored == {"format": "export", "records": 2, "versions": 3, "namespaces": ["default"],
                        "entities": 0, "mentions": 0, "edges": 0, "warnings": []}  # fmt: skip
    assert other.ok("export").stdout == exported
    assert other.json("check")["ok"] is True
    assert "already holds" in other.fails(1, "import", str(path)).stderr


def test_check_exit_code_names_what_is_broken(cli: Cli) -> None:
    rid = cli.add("a fact")
    assert "ok" in cli.ok("check").stdout
    conn = sqlite3.connect(cli.db)
    with conn:  # the current version copied into the past: two of one version
        fields = ", ".join(ROW_FIELDS)
        conn.execute(
            f"INSERT INTO record_past (record, known_from, known_to, {fields})"
            f" SELECT rowid, updated_at, updated_at + 1, {fields} FROM records WHERE id = ?",
            (rid,),
        )
    conn.close()
    failed = cli.fails(1, "check")
    assert "FAIL  versions match records" in failed.stdout
    report = json.loads(cli.fails(1, "check", "--json").stdout)
    assert report["ok"] is False


def test_backup_writes_a_checked_copy_and_never_overwrites(cli: Cli, tmp_path: Path) -> None:
    cli.add("kept")
    copy = tmp_path / "copy.db"
    cli.ok("backup", str(copy))
    assert Cli(copy).json("check")["ok"] is True
    assert "already exists" in cli.fails(2, "backup", str(copy)).stderr


def test_import_refuses_a_fifo_at_once(cli: Cli, tmp_path: Path) -> None:
    """A FIFO (what ``import <(cat export.jsonl)`` names) would be opened twice, the
    second open waiting for a writer that is gone: it is refused before any open, and
    nothing is written."""
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    result = cli.fails(2, "import", str(fifo))
    assert "is a FIFO; import reads a regular file" in " ".join(result.stderr.split())
    assert not cli.db.exists()

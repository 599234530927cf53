"""A SQLite file erstwhile creates has 8 KiB pages (``connection.PAGE_SIZE``: a record's
384-dimension vector fits five to a page, two to SQLite's default 4 KiB one); a file
that exists keeps its own, and works the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import erstwhile
from erstwhile.store.sqlite.connection import PAGE_SIZE


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def _used(path: Path) -> list[str]:
    with erstwhile.open(str(path), embedder="hash", background_jobs=False) as m:
        m.upsert("n", [{"id": f"r{i}", "content": f"the mill by the river {i}"} for i in range(50)])
        return [hit.record.id for hit in m.search("n", "river 7", ranking="lexical").hits[:1]]


def test_a_new_file_has_pages_of_8_kib(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    assert _used(path) == ["r7"]
    assert PAGE_SIZE == 8192 and _page_size(path) == PAGE_SIZE


def test_a_file_of_4_kib_pages_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE theirs (a)")  # a file with pages of its own already
    conn.close()
    assert _used(path) == ["r7"]
    assert _page_size(path) == 4096

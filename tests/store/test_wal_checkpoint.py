"""The SQLite WAL is copied into the file by the writing process's checkpointer thread
(``connection.Checkpointer``), not inside a commit: what that must keep (a real file).

The threshold is lowered so that a few small batches cross it; the thread is waited
for by polling its state with a generous deadline, never by timing it."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import memstrata
from memstrata.embedding import HashEmbedder
from memstrata.store.sql.writes import Writes
from memstrata.store.sqlite import connection
from memstrata.store.sqlite.connection import Database, wal_frames

PAGES = 64  # WAL pages (4 KiB) that wake the checkpointer in these tests


def _batch(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"id": f"r{i}", "content": f"note {i} " + "words " * 200, "tags": [f"t{i % 3}"]}
        for i in range(start, start + count)
    ]


def _idle(db: Database) -> None:
    checkpointer = db._checkpointer
    deadline = time.monotonic() + 60
    while checkpointer is not None and checkpointer.busy():
        assert time.monotonic() < deadline, "the checkpointer never finished"
        time.sleep(0.01)


def test_wal_frames_reads_what_sqlite_reports(tmp_path: Path) -> None:
    """The WAL index's counts (frames, frames copied) are those SQLite's own
    checkpoint reports, before a checkpoint and after one."""
    path = str(tmp_path / "m.db")
    assert wal_frames(path) is None  # no file, no WAL index
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 3000,)] * 50)
    found = wal_frames(path)
    assert found is not None
    frames, copied = found
    assert frames > 50 and copied == 0
    (row,) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    assert row == (0, frames, frames)
    assert wal_frames(path) == (frames, frames)
    conn.close()


def test_the_wal_is_copied_off_the_writer_and_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the threshold the thread copies the WAL into the file; the WAL then starts
    over rather than growing: after many batches it holds about a threshold's worth."""
    monkeypatch.setattr(connection, "WAL_CHECKPOINT_PAGES", PAGES)
    path = tmp_path / "m.db"
    memory = memstrata.open(str(path), embedder=HashEmbedder(64), background_jobs=False)
    db = memory.service.store.dialect.db  # type: ignore[attr-defined]
    written = 0
    for start in range(0, 600, 20):
        memory.upsert("ns", _batch(start, 20))
        written += 20
        _idle(db)
    assert db._checkpointer is not None  # it took over SQLite's checkpoint
    found = wal_frames(str(path))
    assert found is not None
    frames, _ = found
    # every batch wrote pages: without the WAL starting over it would hold them all
    assert os.path.getsize(f"{path}-wal") < 8 * PAGES * 4096
    assert frames < 4 * PAGES
    # and what it copied is in the file: a second process reads every record
    other = sqlite3.connect(path)
    assert other.execute("SELECT count(*) FROM records").fetchone() == (written,)
    other.close()
    checkpointer = db._checkpointer
    memory.close()
    assert not checkpointer._thread.is_alive()  # stopped with the store
    reopened = memstrata.open(str(path), embedder=HashEmbedder(64), background_jobs=False)
    assert reopened.get("ns", "r599").content.startswith("note 599 ")
    reopened.close()


def test_no_checkpointer_below_the_threshold(tmp_path: Path) -> None:
    """A store that writes little never starts the thread."""
    memory = memstrata.open(
        str(tmp_path / "m.db"), embedder=HashEmbedder(64), background_jobs=False
    )
    memory.upsert("ns", _batch(0, 5))
    assert memory.service.store.dialect.db._checkpointer is None  # type: ignore[attr-defined]
    memory.close()


def test_a_copy_that_ends_during_a_write_is_finished_by_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL starts over only at a write that began with it all copied. When the
    thread's copy ends while a write is under way, that write's commit copies the
    rest (its own pages), so the next write starts the WAL over."""
    monkeypatch.setattr(connection, "WAL_CHECKPOINT_PAGES", PAGES)
    gate = threading.Event()
    catch_up = connection.Checkpointer._catch_up

    def gated(self: connection.Checkpointer, conn: sqlite3.Connection) -> None:
        assert gate.wait(60)
        catch_up(self, conn)

    monkeypatch.setattr(connection.Checkpointer, "_catch_up", gated)
    path = str(tmp_path / "m.db")
    memory = memstrata.open(path, embedder=HashEmbedder(64), background_jobs=False)
    db = memory.service.store.dialect.db  # type: ignore[attr-defined]
    start = 0
    while db._checkpointer is None:  # until a commit crosses the threshold
        memory.upsert("ns", _batch(start, 20))
        start += 20
    upsert = Writes.upsert

    def copied_meanwhile(self: Writes, *args: object, **kwargs: object) -> object:
        gate.set()  # the thread copies while this write is under way
        _idle(db)
        return upsert(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Writes, "upsert", copied_meanwhile)
    memory.upsert("ns", _batch(start, 20))
    monkeypatch.setattr(Writes, "upsert", upsert)
    found = wal_frames(path)
    assert found is not None
    frames, copied = found
    assert frames >= PAGES and copied == frames  # all copied by the commit itself
    memory.upsert("ns", _batch(start + 20, 5))
    found = wal_frames(path)
    assert found is not None and found[0] < PAGES  # and the WAL started over
    memory.close()

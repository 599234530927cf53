"""SQLite: the WAL is copied into the database file beside the writers
(``connection.Checkpointer``), not in a writer's commit: a real file, a real store."""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.threads import alive, wait_until_at_most

import erstwhile
from erstwhile.store.sqlite import connection


def _checkpointers() -> int:
    return alive(connection.Checkpointer.name)


def _batch(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"id": f"r{i}", "content": f"note {i} about the mill and the river {i % 13}"}
        for i in range(start, start + count)
    ]


def _grows(path: Path, size: int, seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while os.path.getsize(path) <= size and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.path.getsize(path)


def test_a_commit_reaches_the_database_file_without_a_checkpoint_of_the_writer(
    tmp_path: Path,
) -> None:
    """A small write is far below the WAL size at which a writer checkpoints in its
    commit; its pages still reach the file, copied beside it, and the store reads the
    same before and after."""
    path = tmp_path / "m.db"
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", _batch(0, 5))
        size = _grows(path, 0)  # the first commit's checkpoint
        m.upsert("ns", _batch(5, 300))
        wal = os.path.getsize(f"{path}-wal")
        assert wal < connection.WAL_CHECKPOINT_PAGES * 4096
        assert _grows(path, size) > size
        assert len(m.search("ns", "mill river", ranking="lexical", top_k=400).hits) == 305


def test_the_checkpoint_thread_ends_with_the_store(tmp_path: Path) -> None:
    before = _checkpointers()
    m = erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False)
    assert _checkpointers() == before  # none until the first commit
    m.upsert("ns", _batch(0, 3))
    assert _checkpointers() == before + 1
    m.upsert("ns", _batch(3, 3))
    assert _checkpointers() == before + 1  # one per store
    m.close()
    assert _checkpointers() == before


def test_a_store_dropped_unclosed_ends_its_thread(tmp_path: Path) -> None:
    before = _checkpointers()
    m = erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False)
    m.upsert("ns", _batch(0, 3))
    assert _checkpointers() == before + 1
    del m
    gc.collect()
    assert wait_until_at_most(connection.Checkpointer.name, before) == before


def test_a_hard_delete_waits_for_a_checkpoint_beside_it(tmp_path: Path) -> None:
    """The hard delete's own checkpoint (TRUNCATE, emptying the WAL of the deleted
    pages' images) is made after the one running beside it, not given up: right after
    the delete the WAL is empty, with writes going on just before it."""
    path = tmp_path / "m.db"
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        for n in range(10):
            m.upsert("ns", _batch(300 * n, 300))
        m.upsert("ns", [{"id": "secret", "content": "the vault code is 7341"}])
        m.delete("ns", "secret", hard=True)
        assert os.path.getsize(f"{path}-wal") == 0


class _Scripted(connection.Background):
    """A task answering, run after run, whether it left work behind."""

    name = "erstwhile-test-scripted"
    every_s = 60.0

    def __init__(self, answers: list[bool]) -> None:
        super().__init__()
        self.answers = answers
        self.runs = 0

    @contextlib.contextmanager
    def session(self) -> Iterator[Callable[[], bool | None]]:
        def task() -> bool:
            self.runs += 1
            return self.answers.pop(0)

        yield task


def test_a_task_that_left_work_behind_runs_again_at_the_next_ask() -> None:
    """Runs are at most one every ``every_s`` (here a minute), unless the last one left
    work behind: the next ask is then answered at once."""
    task = _Scripted([True, False, False])
    try:
        task.ask()
        assert task.settle(10.0) and task.runs == 1
        task.ask()  # the first left work behind: no minute's wait
        assert task.settle(10.0) and task.runs == 2
        task.ask()  # the second did not: this one waits out the minute
        assert not task.settle(0.5) and task.runs == 2
    finally:
        task.stop()


def test_the_checkpoint_beside_the_writers_says_when_it_is_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind: frames it could not copy (a reader still on an older state), or a WAL
    half the size at which a writer would checkpoint it in its commit, which SQLite
    starts over only at a write that finds it all copied."""
    path = tmp_path / "m.db"
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        m.service.store.db.conn().execute("PRAGMA wal_autocheckpoint = 0")  # none of its own
        # The store's own checkpointer runs beside the writes (asked by each commit): a
        # PASSIVE checkpoint of its at the same moment as this test's makes this one
        # answer busy. Holding the lock it holds while it runs keeps the two apart.
        own = m.service.store.db._checkpointer
        assert own is not None
        with connection.Checkpointer(str(path)).session() as session:

            def checkpoint() -> bool | None:
                with own.lock:
                    return session()

            m.upsert("ns", _batch(0, 20))
            assert checkpoint() is False  # all copied, a small WAL
            reader = connection.connect(str(path))
            try:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM records").fetchone()  # holds its state
                m.upsert("ns", _batch(20, 20))
                assert checkpoint() is True  # the frames after the reader's state stay
                reader.execute("COMMIT")
            finally:
                reader.close()
            assert checkpoint() is False
            monkeypatch.setattr(connection, "WAL_CHECKPOINT_PAGES", 2)
            m.upsert("ns", _batch(40, 20))
            assert checkpoint() is True  # copied, but the WAL is past half of 2 pages

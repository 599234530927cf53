"""SQLite merges its lexical tail from a thread beside the writers
(``dialect.Merger``): a write that finds the tail due returns without merging it, a
write that finds it twice due (no merge came in between) merges it itself, and where
the documents are never changes what a search finds. A real file, a real store."""

from __future__ import annotations

import gc
import sqlite3
import threading
from functools import partial
from pathlib import Path

import pytest
from tests.support.raw import merges_settled, scalar, select
from tests.support.threads import alive, wait_until_at_most

import erstwhile
from erstwhile.store.sql import lexical
from erstwhile.store.sqlite import lexical_merge
from erstwhile.store.sqlite.dialect import Merger

WORDS = ["river", "stone", "mill", "quiet", "water", "old", "house", "tree", "road"]
QUERIES = ["river", "stone mill", "quiet water", "old house tree"]


def _batch(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"id": f"r{i}", "content": " ".join(WORDS[i % 7 : i % 7 + 2 + i % 3])}
        for i in range(start, start + count)
    ]


def _ranked(m: erstwhile.Memory) -> list[list[tuple[str, float]]]:
    return [[(h.record.id, h.score) for h in m.search("ns", q, ranking="lexical", top_k=50).hits]
            for q in QUERIES]  # fmt: skip


def _mergers() -> int:
    return alive(Merger.name)


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 10)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 10)
    return 10


def test_a_write_leaves_a_due_tail_to_the_thread_beside_it(tmp_path: Path, bound: int) -> None:
    path = str(tmp_path / "m.db")
    tail = f"SELECT count(*) FROM {lexical.TAIL}"
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        merger = m.service.store.dialect.merger
        with merger.lock:  # the thread cannot merge yet
            m.upsert("ns", _batch(0, bound))
            # due, and left to the thread: the write returned with the tail whole
            assert scalar(path, tail) == bound
            assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN}") == 0
            before = _ranked(m)
        merges_settled(m)
        assert scalar(path, tail) == 0
        assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN}") > 0
        assert _ranked(m) == before and any(before)
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]


def test_a_write_merges_a_tail_twice_due_itself(tmp_path: Path, bound: int) -> None:
    """With no merge beside it (the thread held off here, as when the writers leave
    it no turn), the tail grows to twice its bound and no further: the write that
    brings it there merges it."""
    path = str(tmp_path / "m.db")
    seen = []
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        with m.service.store.dialect.merger.lock:
            for start in range(0, 35, 5):
                m.upsert("ns", _batch(start, 5))
                seen.append(scalar(path, f"SELECT count(*) FROM {lexical.TAIL}"))
            held = _ranked(m)
        merges_settled(m)
        # the thread then finds the tail (15) due again, and merges it
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 0
        assert _ranked(m) == held
    assert seen == [5, 10, 15, 0, 5, 10, 15]
    with erstwhile.open(str(tmp_path / "fresh.db"), embedder="none",
                        background_jobs=False) as fresh:  # fmt: skip
        fresh.upsert("ns", _batch(0, 35))
        assert _ranked(fresh) == held  # as one postings table would rank


def test_writers_in_threads_and_the_merges_beside_them_rank_as_one_table(
    tmp_path: Path, bound: int
) -> None:
    """Four threads writing (new records and rewrites of the same ids) while merges
    come and go beside them: the same rankings as a store written in one go."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:

        def write(part: int) -> None:
            for start in range(part * 40, part * 40 + 40, 4):
                m.upsert("ns", _batch(start, 4))
                m.upsert("ns", [{"id": f"r{start}", "content": "quiet water mill"}])

        threads = [threading.Thread(target=write, args=(part,)) for part in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        merges_settled(m)
        found = _ranked(m)
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        one.upsert("ns", _batch(0, 160))
        one.upsert("ns", [{"id": f"r{s}", "content": "quiet water mill"} for s in range(0, 160, 4)])
        assert _ranked(one) == found and any(found)


def test_the_merge_thread_ends_with_the_store(tmp_path: Path, bound: int) -> None:
    before = _mergers()
    m = erstwhile.open(tmp_path / "m.db", embedder="none", background_jobs=False)
    m.upsert("ns", _batch(0, 3))
    assert _mergers() == before  # none until a merge is first due
    m.upsert("ns", _batch(3, bound))
    merges_settled(m)
    assert _mergers() == before + 1
    m.close()
    assert _mergers() == before


def test_a_store_dropped_unclosed_ends_its_merge_thread(tmp_path: Path, bound: int) -> None:
    before = _mergers()
    m = erstwhile.open(tmp_path / "m.db", embedder="none", background_jobs=False)
    m.upsert("ns", _batch(0, bound))
    merges_settled(m)
    assert _mergers() == before + 1
    del m
    gc.collect()
    assert wait_until_at_most(Merger.name, before) == before


class _Held:
    """``lexical_merge.merge_beside`` on a thread of the test's (the store's own thread is
    never asked), held where a subclass calls :meth:`hold` until the ``with`` block
    ends; what the writers do inside is what the merge must allow for."""

    def __init__(self, m: erstwhile.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached, self.go = threading.Event(), threading.Event()
        self.failed: list[BaseException] = []
        dialect = m.service.store.dialect
        monkeypatch.setattr(dialect.lexical_tail, "merge", lambda: None)
        self.thread = threading.Thread(target=self._run, args=(dialect,))

    def _run(self, dialect: object) -> None:
        try:
            lexical_merge.merge_beside(dialect)  # type: ignore[arg-type]
        except RuntimeError as error:  # a merge made to end there (its process gone)
            self.failed.append(error)

    def hold(self) -> None:
        """On the merge's thread: waits for the block to end."""
        if threading.current_thread() is self.thread:
            self.reached.set()
            assert self.go.wait(30)

    def __enter__(self) -> _Held:
        self.thread.start()
        assert self.reached.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


class _Paused(_Held):
    """Held once the merge has made its postings (in its read transaction), before it
    claims and copies them."""

    def __init__(self, m: erstwhile.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(m, monkeypatch)
        prepare = lexical_merge._prepare

        def paused(tx: object, last: int) -> None:
            prepare(tx, last)  # type: ignore[arg-type]
            self.hold()

        monkeypatch.setattr(lexical_merge, "_prepare", paused)


def _rowid(path: str, record_id: str) -> int:
    return int(scalar(path, "SELECT rowid FROM records WHERE id = ?", (record_id,)))


def test_writes_while_a_merge_makes_its_postings_stay_in_the_tail(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New records, a tail record rewritten and one hard-deleted after the merge has
    made its postings (before it moves them): the move leaves the three in the tail,
    moves the rest, and the store ranks as one written in one go."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        paused = _Paused(m, monkeypatch)  # before the write that finds the tail due
        m.upsert("ns", _batch(0, bound))
        gone, rewritten = _rowid(path, "r5"), _rowid(path, "r2")
        with paused:
            m.upsert("ns", _batch(bound, 4))
            m.upsert("ns", [{"id": "r2", "content": "old road house"}])
            m.delete("ns", "r5", hard=True)
        # the rows written since: four new records, the rewrite and the removal
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 6
        for rowid in (gone, rewritten):
            assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN} WHERE record = ?",
                          (rowid,)) == 0  # fmt: skip
        assert scalar(path, f"SELECT count(DISTINCT record) FROM {lexical.MAIN}") == bound - 2
        found = _ranked(m)
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]
        m.service.store.db.write(partial(lexical_merge.merge_tail, m.service.store.dialect))
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 0
        assert _ranked(m) == found
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        final = [r for r in _batch(0, bound + 4) if r["id"] != "r5"]
        one.upsert("ns", [{**r, "content": "old road house"} if r["id"] == "r2" else r
                          for r in final])  # fmt: skip
        assert _ranked(one) == found and any(found)


def test_a_merge_gives_up_when_another_came_between(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that finds the tail twice due merges it while the merge beside it holds
    postings it made before: that merge then moves nothing (they would count twice)."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        paused = _Paused(m, monkeypatch)
        m.upsert("ns", _batch(0, bound))
        with paused:
            m.upsert("ns", _batch(bound, bound))  # twice due: merged by the write
            assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 0
            merged = scalar(path, f"SELECT count(*) FROM {lexical.MAIN}")
        assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN}") == merged
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]
        found = _ranked(m)
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        one.upsert("ns", _batch(0, 2 * bound))
        assert _ranked(one) == found and any(found)


class _CopyHeld(_Held):
    """Held once ``copies`` of the merge's copies into the postings table have
    committed (``MOVE_CHUNK`` = 4: a few postings each; ``fail``: and ended there, as
    by a crash of its process)."""

    def __init__(
        self, m: erstwhile.Memory, monkeypatch: pytest.MonkeyPatch, copies: int = 1,
        *, fail: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(m, monkeypatch)
        monkeypatch.setattr(lexical_merge, "MOVE_CHUNK", 4)
        monkeypatch.setattr(lexical_merge, "MOVE_WAIT_S", 0.0)
        copy, made = lexical_merge._copy, []

        def counted(*args: object) -> tuple[str, list[object]]:
            if threading.current_thread() is self.thread:
                if len(made) == copies:
                    if fail:
                        self.reached.set()
                        raise RuntimeError("the merge's process ends here")
                    self.hold()
                made.append(args)
            return copy(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(lexical_merge, "_copy", counted)


def _copied(path: str) -> int:
    """Postings of a segment some merge has claimed and not listed yet."""
    return int(scalar(path, f"SELECT count(*) FROM {lexical.MAIN} p JOIN {lexical.PENDING} c"
                            " ON c.namespace = p.namespace AND c.seg = p.seg"))  # fmt: skip


def _ok(m: erstwhile.Memory) -> None:
    report = m.service.store.integrity()
    assert all(f.ok for f in report), [f.problems for f in report]


def test_postings_a_merge_has_copied_are_in_no_search_until_it_lists_them(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between a merge's copies: its postings are in the table under a claimed
    segment, every search ranks as before, and writes go on. A record rewritten and
    one hard-deleted after their postings were copied keep none of them (the hard
    delete at once), records written meanwhile stay in the tail, and once listed the
    store ranks as one written in one go."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        held = _CopyHeld(m, monkeypatch)
        m.upsert("ns", _batch(0, bound))
        before = _ranked(m)
        with held:
            copied = select(path, f"SELECT DISTINCT p.record FROM {lexical.MAIN} p"
                                  f" JOIN {lexical.PENDING} c ON c.seg = p.seg")  # fmt: skip
            assert copied and _copied(path) == scalar(path, f"SELECT count(*) FROM {lexical.MAIN}")
            assert _ranked(m) == before
            _ok(m)
            rowids = {_rowid(path, f"r{i}"): f"r{i}" for i in range(bound)}
            gone, rewritten = (rowids[row[0]] for row in copied[:2])
            m.upsert("ns", _batch(bound, 3))
            m.upsert("ns", [{"id": rewritten, "content": "old road house"}])
            m.delete("ns", gone, hard=True)
            assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN} WHERE record = ?",
                          (copied[1][0],)) == 0  # fmt: skip
            _ok(m)
        assert not held.failed
        assert scalar(path, f"SELECT count(*) FROM {lexical.PENDING}") == 0
        # the tail: the three new records, the rewrite and the removal
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 5
        for record in (copied[0][0], copied[1][0]):
            assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN} WHERE record = ?",
                          (record,)) == 0  # fmt: skip
        found = _ranked(m)
        _ok(m)
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        final = [r for r in _batch(0, bound + 3) if r["id"] != gone]
        one.upsert("ns", [{**r, "content": "old road house"} if r["id"] == rewritten else r
                          for r in final])  # fmt: skip
        assert _ranked(one) == found and any(found)


def test_a_merge_that_ends_between_its_copies_leaves_them_to_the_next_one(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge ended after its first copy (its process gone): what it copied is in
    no search and no count, a hard delete still leaves none of a record's postings
    there, and the next merge that lists its own removes them with the claim."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        held = _CopyHeld(m, monkeypatch, fail=True)
        m.upsert("ns", _batch(0, bound))
        before = _ranked(m)
        with held:
            pass
        assert held.failed
        copied = select(path, f"SELECT DISTINCT p.record FROM {lexical.MAIN} p"
                              f" JOIN {lexical.PENDING} c ON c.seg = p.seg")  # fmt: skip
        assert copied and _copied(path) > 0
        assert _ranked(m) == before
        _ok(m)
        gone = str(scalar(path, "SELECT id FROM records WHERE rowid = ?", (copied[0][0],)))
        m.delete("ns", gone, hard=True)
        assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN} WHERE record = ?",
                      (copied[0][0],)) == 0  # fmt: skip
        monkeypatch.undo()  # the store's own thread merges again, as it does
        monkeypatch.setattr(lexical_merge, "TAIL_ROWS", bound)
        monkeypatch.setattr(lexical_merge, "TAIL_MAX", bound)
        m.upsert("ns", _batch(bound, 2))
        merges_settled(m)
        assert scalar(path, f"SELECT count(*) FROM {lexical.PENDING}") == 0
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 0
        found = _ranked(m)
        _ok(m)
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        one.upsert("ns", [r for r in _batch(0, bound + 2) if r["id"] != gone])
        assert _ranked(one) == found and any(found)


def test_a_merge_whose_segment_another_claimed_gives_up(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes' merges of the same tail rows claim the same segment: the one
    that comes second copies nothing and leaves the tail whole."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        monkeypatch.setattr(m.service.store.dialect.lexical_tail, "merge", lambda: None)
        m.upsert("ns", _batch(0, bound))
        last = scalar(path, f"SELECT max(seq) FROM {lexical.TAIL}")
        with sqlite3.connect(path) as other:  # the other process's claim
            other.execute(f"INSERT INTO {lexical.PENDING} VALUES ('ns', ?)", (last,))
        lexical_merge.merge_beside(m.service.store.dialect)
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == bound
        assert scalar(path, f"SELECT count(*) FROM {lexical.MAIN}") == 0
        assert _ranked(m) and any(_ranked(m))


def test_a_merge_inside_a_write_takes_the_segment_a_dead_merge_claimed(
    tmp_path: Path, bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge ended after its first copy, and nothing written since: the next merge
    of the same tail rows makes the same segment. Made inside a write, it removes the
    dead claim and its postings before it moves its own, and the store ranks as one
    written in one go (it once failed the write: the copied postings collided)."""
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        held = _CopyHeld(m, monkeypatch, fail=True)
        m.upsert("ns", _batch(0, bound))
        last = scalar(path, f"SELECT max(seq) FROM {lexical.TAIL}")
        with held:
            pass
        assert held.failed
        assert _copied(path) > 0
        assert scalar(path, f"SELECT max(seg) FROM {lexical.PENDING}") == last
        store = m.service.store
        store.db.write(partial(lexical_merge.merge_tail, store.dialect))
        assert scalar(path, f"SELECT count(*) FROM {lexical.PENDING}") == 0
        assert scalar(path, f"SELECT count(*) FROM {lexical.TAIL}") == 0
        found = _ranked(m)
        _ok(m)
    with erstwhile.open(str(tmp_path / "one.db"), embedder="none",
                        background_jobs=False) as one:  # fmt: skip
        one.upsert("ns", _batch(0, bound))
        assert _ranked(one) == found and any(found)

"""SQLite's change sequence of records (``scope_log``, which the scope copy and the past
vectors catch up from): a new record's rowid is appended by the insert of its row
(since m013; a trigger did before), an update's and a delete's by their triggers. Each
change must be there once (a real file)."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from contextlib import suppress
from functools import partial
from pathlib import Path

import pytest
from tests.support.raw import merges_settled

import erstwhile
from erstwhile.domain.errors import WriteConflict
from erstwhile.domain.records import Record
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sql.rows import row_values
from erstwhile.store.sqlite import change_log, lexical_merge


def _open(path: Path) -> erstwhile.Memory:
    return erstwhile.open(str(path), embedder=HashEmbedder(32), background_jobs=False)


def _logged(path: Path) -> Counter[int]:
    with sqlite3.connect(path) as conn:
        return Counter(record for (record,) in conn.execute("SELECT record FROM scope_log"))


def _rowids(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT id, rowid FROM records"))


def _batch(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"id": f"r{i}", "content": f"note {i}", "metadata": {"room": f"room-{i % 3}"},
         "valid_from": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
         **({"supersedes": [f"r{i - 1}"]} if i % 5 == 4 else {})}
        for i in range(start, start + count)
    ]  # fmt: skip


def test_every_insert_update_and_delete_is_logged_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    memory = _open(path)
    # new records of the straight path, and records that supersede one (general path)
    memory.upsert("ns", _batch(0, 20))
    ids = _rowids(path)
    closed = {ids[f"r{i - 1}"] for i in range(20) if i % 5 == 4}  # updated once each
    assert _logged(path) == Counter({rowid: 1 + (rowid in closed) for rowid in ids.values()})
    # an insert outside a batch (no rowid drawn ahead), as an import writes its rows
    store = memory.service.store
    record = Record(id="lone", namespace="ns", content="lone note")
    written = _revised(record)

    def insert(tx: object) -> int:
        return store.dialect.insert_record(tx, None, row_values(written))  # type: ignore[attr-defined,no-any-return]

    lone = store.dialect.db.write(insert)  # type: ignore[attr-defined]
    memory.upsert("ns", [{"id": "r0", "content": "note 0 revised"}])
    memory.delete("ns", "r1", hard=True)
    expected = Counter({rowid: 1 + (rowid in closed) for rowid in ids.values()})
    expected[lone] += 1
    expected[ids["r0"]] += 1  # its revision
    expected[ids["r1"]] += 1  # its delete
    assert _logged(path) == expected
    memory.close()


def _revised(record: Record) -> Record:
    """``record`` with what a write sets (as stored, version 1)."""
    from erstwhile.domain import rules

    return rules.revision(
        record, None, "", namespace="ns", now=1_700_000_000_000_000, has_predecessor=lambda: False
    )


def test_a_store_with_the_insert_trigger_loses_it_and_logs_inserts_once(tmp_path: Path) -> None:
    """A file from before m013 (the insert trigger in place) is migrated: the trigger
    goes, so a new record is logged once, not twice."""
    path = tmp_path / "m.db"
    memory = _open(path)
    memory.upsert("ns", _batch(0, 3))
    memory.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER records_scope_insert AFTER INSERT ON records"
            " BEGIN INSERT INTO scope_log (record) VALUES (NEW.rowid); END"
        )
        conn.execute(
            "DELETE FROM schema_migrations WHERE name = 'm013_scope_log_without_insert_trigger'"
        )
    memory = _open(path)
    memory.upsert("ns", [{"id": "new", "content": "a new note"}])
    memory.close()
    with sqlite3.connect(path) as conn:
        triggers = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'")}  # fmt: skip
    assert "records_scope_insert" not in triggers
    assert _logged(path)[_rowids(path)["new"]] == 1


def test_the_scope_copy_sees_records_written_after_it_was_built(tmp_path: Path) -> None:
    """What the log is for: a process's scope copy, built, then caught up from it."""
    memory = _open(tmp_path / "m.db")
    memory.upsert("ns", _batch(0, 10))
    for _ in range(5):  # past the searches after which the copy is built
        memory.search("ns", "note", filter={"room": "room-1"}, top_k=50)
    memory.upsert("ns", [{"id": "late", "content": "late note", "metadata": {"room": "room-1"}}])
    found = memory.search("ns", "note", filter={"room": "room-1"}, top_k=50)
    assert "late" in {hit.record.id for hit in found.hits}
    memory.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_copy_behind_the_pruned_log_loads_itself_whole(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each lexical merge prunes the log to its newest entries (here 4, or one per
    record: ``change_log.LOG_KEEP``, lowered). A second handle's scope copy and past
    vectors, built and left behind while the first handle writes (rewrites, invalidations,
    verifications, hard deletes), answer as a handle opened fresh on the file."""
    monkeypatch.setattr(change_log, "LOG_KEEP", 4)
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 6)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 6)
    rnd = random.Random(seed)
    path = tmp_path / "m.db"
    writer, reader = _open(path), _open(path)
    writer.upsert("ns", _batch(0, 30))
    live = [f"r{i}" for i in range(30)]

    def answers(m: erstwhile.Memory) -> list[list[tuple[str, float]]]:
        asked = (("note", {"filter": {"room": "room-1"}}), ("note 7", {"include_historical": True}),
                 ("note 3", {"as_of": "2024-01-01T00:00:20Z"}))  # fmt: skip
        return [[(h.record.id, round(h.score, 6)) for h in m.search("ns", q, top_k=50, **o).hits]
                for q, o in asked]  # fmt: skip

    for _ in range(4):  # the reader's copies are built
        answers(reader)
    pruned = 0
    for step in range(60):
        chosen = rnd.choice(live)
        action = rnd.randrange(4)
        if action == 0:
            writer.upsert("ns", [{"id": chosen, "content": f"note {step} again",
                                  "metadata": {"room": f"room-{step % 3}"}}])  # fmt: skip
        elif action == 1:
            with suppress(WriteConflict):  # a superseded version's validity is closed
                writer.invalidate("ns", chosen)
        elif action == 2:
            writer.verify("ns", chosen, "ana")
        elif len(live) > 5:
            writer.delete("ns", chosen, hard=True)
            live.remove(chosen)
        merges_settled(writer)
        if step % 5 == 4:
            with sqlite3.connect(path) as conn:
                (first,) = conn.execute("SELECT min(seq) FROM scope_log").fetchone()
            pruned = max(pruned, first - 1)
            fresh = _open(path)
            assert answers(reader) == answers(fresh)
            fresh.close()
    assert pruned > 0, "no merge pruned the log"
    writer.close()
    reader.close()


def test_a_copy_whose_next_entries_were_pruned_sees_every_change(tmp_path: Path) -> None:
    """Pruned harder than a merge ever does (the newest entry kept alone), a copy two
    changes behind cannot catch up from the log: it notices and loads itself whole."""
    path = tmp_path / "m.db"
    writer, reader = _open(path), _open(path)
    writer.upsert("ns", _batch(0, 200))

    def answers(m: erstwhile.Memory) -> list[str]:
        found = m.search("ns", "note", top_k=300, filter={"room": "room-1"})
        return [h.record.id for h in found.hits]

    for _ in range(4):  # the reader's copy is built
        answers(reader)
    writer.invalidate("ns", "r1")  # in room-1: it leaves the current answer
    writer.verify("ns", "r5", "ana")
    store = writer.service.store
    assert store.db.write(partial(change_log.prune_log, keep=1)) > 0  # type: ignore[attr-defined]
    fresh = _open(path)
    assert "r1" not in answers(fresh)
    assert answers(reader) == answers(fresh)
    for memory in (fresh, writer, reader):
        memory.close()

"""SQLite's change sequence of records (``scope_log``, which the scope copy and the past
vectors catch up from): a new record's rowid is appended by the insert of its row
(since m013; a trigger did before), an update's and a delete's by their triggers. Each
change must be there once (a real file)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sql.rows import row_values


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

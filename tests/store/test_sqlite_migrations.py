"""A file written by the first schema opens under the current one with nothing lost:
the scope rows gain their record's namespace and validity, and vector change order
carries on from where it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.domain.search import parse_number
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sql.rows import row_values
from erstwhile.store.sqlite import migrations
from erstwhile.store.sqlite.connection import connect

DAY = "2026-01-0{}T00:00:00Z"


def write_first_schema_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two records in "ns" (one ended) and one in "other", with tags, metadata and
    vectors, written as the first schema stored them."""
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
    conn = connect(str(path))
    assert migrations.apply_migrations(conn, 0) == ["m001_records"]
    embedder = HashEmbedder()
    records = [
        ("ns", "open", None),
        ("ns", "ended", DAY.format(3)),
        ("other", "open", None),
    ]
    conn.execute("BEGIN")
    for seq, (namespace, record_id, valid_to) in enumerate(records, start=1):
        record = Record.model_validate(
            {
                "namespace": namespace, "id": record_id, "content": f"quiet river {record_id}",
                "tags": ["t"], "metadata": {"room": "r1", "priority": "2"},
                "created_at": DAY.format(1), "updated_at": DAY.format(1),
                "valid_from": DAY.format(1), "valid_to": valid_to, "version": 1,
            }
        )  # fmt: skip
        values = row_values(record)
        columns = ", ".join(values)
        marks = ", ".join(f":{name}" for name in values)
        rowid = conn.execute(f"INSERT INTO records ({columns}) VALUES ({marks})", values).lastrowid
        conn.execute("INSERT INTO record_tags (record, tag) VALUES (?, 't')", (rowid,))
        for key, value in record.metadata.items():
            conn.execute(
                "INSERT INTO record_meta (record, key, value, num) VALUES (?, ?, ?, ?)",
                (rowid, key, value, parse_number(value)),
            )
        conn.execute(
            "INSERT INTO records_fts (rowid, content) VALUES (?, ?)", (rowid, record.content)
        )
        vector = embedder.embed_documents([record.content])[0].astype("<f4")
        conn.execute(
            "INSERT INTO vectors (record, embedder_id, seq, dimensions, vector)"
            " VALUES (?, ?, ?, ?, ?)",
            (rowid, embedder.embedder_id, seq, vector.shape[0], vector.tobytes()),
        )
    conn.execute("COMMIT")
    conn.close()
    monkeypatch.undo()


def test_a_first_schema_file_migrates_with_scope_rows_and_vectors_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    write_first_schema_file(path, monkeypatch)
    with erstwhile.open(str(path), embedder="hash", background_jobs=False) as m:
        for ranking in ("lexical", "semantic"):
            scoped = {"tags": ["t"], "filter": {"room": "r1"}, "ranking": ranking}
            assert m.search("ns", "river", **scoped).ids() == ["open"]
            above_one = [{"key": "priority", "op": "GT", "values": ["1"]}]
            assert m.search("ns", "river", predicates=above_one, ranking=ranking).ids() == ["open"]
            assert sorted(m.search("ns", "river", include_historical=True, **scoped).ids()) == [
                "ended", "open"]  # fmt: skip
            assert m.search("ns", "river", as_of=DAY.format(2), **scoped).unembedded == 0
        # writes after the migration keep the scope rows and the change order right
        m.invalidate("ns", "open", at=DAY.format(5))
        m.upsert("ns", [{"id": "new", "content": "quiet river new", "tags": ["t"]}])
        assert m.search("ns", "river", tags=["t"], ranking="semantic").ids() == ["new"]
    conn = sqlite3.connect(path)
    for table in ("record_tags", "record_meta"):
        disagreeing = conn.execute(
            f"SELECT count(*) FROM {table} m JOIN records r ON r.rowid = m.record"
            " WHERE m.namespace IS NOT r.namespace OR m.valid_from IS NOT r.valid_from"
            " OR m.valid_to IS NOT r.valid_to OR m.deleted_at IS NOT r.deleted_at"
        ).fetchone()[0]
        assert disagreeing == 0, table
    assert conn.execute("SELECT count(*) FROM record_tags").fetchone()[0] == 4
    # the vector copies follow scope_log since m019: no seq of their own
    assert "seq" not in [row[1] for row in conn.execute("PRAGMA table_info(vectors)")]
    new = conn.execute("SELECT rowid FROM records WHERE id = 'new'").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM scope_log WHERE record = ?", (new,)).fetchone()[0]
    conn.close()

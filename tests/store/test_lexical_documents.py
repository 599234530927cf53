"""SQLite finds a record's postings by its document (``lexical_docs``: its terms),
not by an index on record: a store from before it (m011) gains the same documents
from its postings, and content rewrites and hard deletes of records whose postings
are merged or still in the tail leave postings, documents and statistics that agree."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.support.raw import (
    dump_tables,
    full_text_matches,
    merges_settled,
    scalar,
    tail_postings,
)

import erstwhile
from erstwhile.store.sqlite import lexical_merge

QUERIES = ["river", "stone mill", "quiet water", "old house tree", "lantern"]

#: The m010 schema: the two postings tables (the tail's documents as fresh postings),
#: each indexed by record and by term first (not by merge: m015), no documents.
_BEFORE = [
    "CREATE TABLE lexical_fresh (namespace TEXT NOT NULL, term TEXT NOT NULL,"
    " record INTEGER NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL,"
    " PRIMARY KEY (namespace, term, record)) WITHOUT ROWID",
    "CREATE TABLE lexical_fresh_written (rows INTEGER NOT NULL)",
    "INSERT INTO lexical_fresh_written (rows) SELECT count(*) FROM lexical_fresh",
    "CREATE TABLE lexical_by_term (namespace TEXT NOT NULL, term TEXT NOT NULL,"
    " record INTEGER NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL,"
    " PRIMARY KEY (namespace, term, record)) WITHOUT ROWID",
    "INSERT INTO lexical_by_term SELECT namespace, term, record, tf, length FROM lexical_postings",
    "DROP TABLE lexical_postings",
    "ALTER TABLE lexical_by_term RENAME TO lexical_postings",
    "DROP TABLE lexical_segments",
    "DROP TABLE lexical_docs",
    "DROP TABLE lexical_tail",
    "CREATE INDEX vectors_seq_all ON vectors (record)",  # m012 drops it (m019 the column)
    "CREATE INDEX lexical_postings_record ON lexical_postings (namespace, record)",
    "CREATE INDEX lexical_fresh_record ON lexical_fresh (namespace, record)",
    "DELETE FROM schema_migrations WHERE name IN ('m011_lexical_documents', 'm012_lexical_tail',"
    " 'm015_lexical_segments')",
]


def _write(m: erstwhile.Memory, ns: str) -> None:
    words = ["river", "stone", "mill", "quiet", "water", "old", "house", "tree", "road"]
    m.upsert(ns, [{"id": f"r{i}", "content": " ".join(words[i % 6 : i % 6 + 3] * (1 + i % 2))}
                  for i in range(12)])  # fmt: skip
    merges_settled(m)
    m.upsert(ns, [{"id": f"n{i}", "content": f"{words[i]} lantern"} for i in range(6)])
    merges_settled(m)


def _ranked(m: erstwhile.Memory, ns: str) -> list[list[tuple[str, float]]]:
    return [[(h.record.id, h.score) for h in m.search(ns, q, ranking="lexical").hits]
            for q in QUERIES]  # fmt: skip


def _clean(m: erstwhile.Memory) -> None:
    report = m.service.store.integrity()
    assert all(f.ok for f in report), [f.problems for f in report]


def test_an_older_store_gains_the_documents_of_its_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # merged at the third write (30 in the tail), the fourth's 6 in the tail
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 20)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 20)
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        for ns in ("a", "b"):
            _write(m, ns)
        ranked = {ns: _ranked(m, ns) for ns in ("a", "b")}
    assert scalar(path, "SELECT count(*) FROM lexical_postings") > 0
    assert scalar(path, "SELECT count(*) FROM lexical_tail") == 6
    documents = dump_tables(path, ["lexical_docs"])
    assert len(documents["lexical_docs"]) == 36
    fresh = tail_postings(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(_BEFORE[0])
        conn.executemany("INSERT INTO lexical_fresh VALUES (?, ?, ?, ?, ?)", fresh)
        for statement in _BEFORE[1:]:
            conn.execute(statement)
    conn.close()
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        assert dump_tables(path, ["lexical_docs"]) == documents
        assert {ns: _ranked(m, ns) for ns in ("a", "b")} == ranked
        _clean(m)
    indexes = "SELECT count(*) FROM sqlite_master WHERE name LIKE 'lexical_%_record'"
    assert scalar(path, indexes) == 0
    assert scalar(path, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%fresh%'") == 0
    assert scalar(path, "SELECT count(*) FROM lexical_tail") == 0  # merged by m012


@pytest.mark.parametrize("merged", [True, False])
def test_rewrites_and_hard_deletes_find_the_postings_by_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merged: bool
) -> None:
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 1 if merged else 10**9)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 1 if merged else 10**9)
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        _write(m, "a")
        _write(m, "b")
        old = m.get("a", "r0").updated_at
        m.upsert("a", [{"id": "r0", "content": "a lantern by the harbour"},
                       {"id": "r2", "content": "harbour harbour stone"}])  # fmt: skip
        m.delete("a", "n3", hard=True)
        _clean(m)
        assert full_text_matches(path, "quiet") > 0  # still held by other records
        # the words r0 held are gone from its postings; the new ones are found
        assert "r0" not in m.search("a", "river", ranking="lexical").ids()
        assert m.search("a", "harbour", ranking="lexical").ids()[:2] == ["r2", "r0"]
        # ... and its old content is still ranked as known before the rewrite
        known = m.search("a", "river", ranking="lexical", known_at=old).ids()
        assert "r0" in known
        # a namespace the same but for the rewrites ranks as a fresh store would
        with erstwhile.open(str(tmp_path / "fresh.db"), embedder="none",
                            background_jobs=False) as other:  # fmt: skip
            _write(other, "a")
            other.upsert("a", [{"id": "r0", "content": "a lantern by the harbour"},
                               {"id": "r2", "content": "harbour harbour stone"}])  # fmt: skip
            other.delete("a", "n3", hard=True)
            assert _ranked(m, "a") == _ranked(other, "a")
    assert scalar(path, "SELECT count(*) FROM lexical_docs WHERE terms LIKE '%harbour%'") == 2

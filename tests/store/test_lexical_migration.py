"""A store from before the lexical lane's own tables (SQLite: FTS5; PostgreSQL: a
``tsvector`` column with a GIN index) opens with every record indexed anew: the same
ranking as a store written fresh, and the old full-text objects gone."""

from __future__ import annotations

import pytest
from tests.support import pg
from tests.support.raw import backend_of, execute, scalar

import erstwhile

RECORDS = [
    {"id": "a", "content": "The river runs past the old mill"},
    {"id": "b", "content": "Running water over stones"},
    {"id": "c", "content": "A quiet stone house"},
]
QUERIES = ["running river", "stones", "mill house"]

_BEFORE = {
    "sqlite": [
        "DROP TABLE lexical_postings",
        "DROP TABLE lexical_terms",
        "DROP TABLE lexical_stats",
        # from later migrations (m010 to m012, m015), run again after m007
        "DROP TABLE lexical_tail",
        "CREATE INDEX vectors_seq_all ON vectors (record)",  # m012 drops it (m019 the column)
        "DROP TABLE lexical_docs",
        "DROP TABLE lexical_segments",
        "DELETE FROM schema_migrations WHERE name IN ('m010_fresh_postings',"
        " 'm011_lexical_documents', 'm012_lexical_tail', 'm015_lexical_segments')",
        "CREATE VIRTUAL TABLE records_fts USING fts5 (content,"
        " tokenize = 'unicode61 remove_diacritics 2')",
        "INSERT INTO records_fts (rowid, content) SELECT rowid, content FROM records",
        "DELETE FROM schema_migrations WHERE name = 'm007_lexical_postings'",
    ],
    "postgres": [
        "DROP TABLE lexical_postings",
        "DROP TABLE lexical_terms",
        "DROP TABLE lexical_stats",
        "ALTER TABLE records ADD COLUMN tsv tsvector NOT NULL DEFAULT ''",
        "UPDATE records SET tsv = to_tsvector('simple', content)",
        "CREATE INDEX records_tsv ON records USING gin (tsv)",
        "ALTER TABLE namespaces ADD COLUMN text_search text NOT NULL DEFAULT 'simple'",
        "DELETE FROM schema_migrations WHERE name = 'm005_lexical_postings'",
    ],
}


def _ranked(m: erstwhile.Memory) -> list[list[tuple[str, float]]]:
    return [
        [(h.record.id, h.score) for h in m.search(ns, q, ranking="lexical").hits]
        for ns in ("one", "two")
        for q in QUERIES
    ]


def test_an_old_full_text_index_migrates_to_the_same_ranking(store_target: str) -> None:
    if pg.on_citus(store_target):
        pytest.skip("no release before this one ran on Citus: an upgrade from before this "
                    "migration never meets a distributed store")  # fmt: skip
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.upsert("one", RECORDS)
        m.upsert("two", RECORDS[:2])
        m.delete("two", "b")  # tombstoned: still counted by the statistics
        fresh = _ranked(m)
    assert any(fresh)
    for statement in _BEFORE[backend_of(store_target)]:
        execute(store_target, statement)
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        assert _ranked(m) == fresh
        assert sorted(m.search("one", "runs", ranking="lexical").ids()) == ["a", "b"]
    if backend_of(store_target) == "sqlite":
        gone = "SELECT count(*) FROM sqlite_master WHERE name = 'records_fts'"
    else:
        gone = (
            "SELECT count(*) FROM information_schema.columns WHERE table_schema ="
            " current_schema() AND table_name = 'records' AND column_name = 'tsv'"
        )
    assert scalar(store_target, gone) == 0

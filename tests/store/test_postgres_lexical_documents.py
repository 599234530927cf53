"""PostgreSQL finds a record's postings by its document (``lexical_docs``, m011), as
SQLite does, not by an index on record: a store from before m011 gains the same
documents from its postings, and content rewrites and hard deletes leave postings,
documents and statistics that agree (a real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from tests.support import pg
from tests.support.raw import dump_tables, full_text_matches

import erstwhile

QUERIES = ["river", "stone mill", "quiet water", "old house tree", "lantern", "harbour"]
#: The m010 schema: the postings' index by record, no documents.
_BEFORE = [
    "DROP TABLE lexical_docs",
    "CREATE INDEX lexical_postings_record ON lexical_postings (namespace, record)",
    "DELETE FROM schema_migrations WHERE name = 'm011_lexical_documents'",
]


@pytest.fixture
def target(postgres_server: pg.PgServer) -> Iterator[str]:
    url = postgres_server.new_target()
    yield url
    postgres_server.drop_target(url)


def _write(m: erstwhile.Memory, ns: str) -> None:
    words = ["river", "stone", "mill", "quiet", "water", "old", "house", "tree", "road"]
    m.upsert(ns, [{"id": f"r{i}", "content": " ".join(words[i % 6 : i % 6 + 3] * (1 + i % 2))}
                  for i in range(12)])  # fmt: skip
    # enough rows to go by COPY, the documents with them
    m.upsert(ns, [{"id": f"n{i}", "content": f"{words[i % 9]} lantern {i}"} for i in range(80)])


def _ranked(m: erstwhile.Memory, ns: str) -> list[list[tuple[str, float]]]:
    return [[(h.record.id, h.score) for h in m.search(ns, q, ranking="lexical").hits]
            for q in QUERIES]  # fmt: skip


def _clean(m: erstwhile.Memory) -> None:
    report = m.service.store.integrity()
    assert all(f.ok for f in report), [f.problems for f in report]


def test_an_older_store_gains_the_documents_of_its_postings(target: str) -> None:
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        for ns in ("a", "b"):
            _write(m, ns)
        ranked = {ns: _ranked(m, ns) for ns in ("a", "b")}
    documents = dump_tables(target, ["lexical_docs"])
    assert len(documents["lexical_docs"]) == 2 * 92
    with psycopg.connect(target) as conn:
        for statement in _BEFORE:
            conn.execute(statement.encode())
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        assert dump_tables(target, ["lexical_docs"]) == documents
        assert {ns: _ranked(m, ns) for ns in ("a", "b")} == ranked
        _clean(m)
    with psycopg.connect(target) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'lexical_postings'"
            " AND schemaname = current_schema()"
        ).fetchone()
    assert row == (1,)  # the primary key alone


def test_rewrites_and_hard_deletes_find_the_postings_by_the_document(
    target: str, tmp_path: object
) -> None:
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        _write(m, "a")
        _write(m, "b")
        old = m.get("a", "r0").updated_at
        m.upsert("a", [{"id": "r0", "content": "a lantern by the harbour"},
                       {"id": "r2", "content": "harbour harbour stone"}])  # fmt: skip
        m.delete("a", "n3", hard=True)
        _clean(m)
        assert full_text_matches(target, "quiet") > 0  # still held by other records
        assert "r0" not in m.search("a", "river", ranking="lexical").ids()
        assert m.search("a", "harbour", ranking="lexical").ids()[:2] == ["r2", "r0"]
        assert "r0" in m.search("a", "river", ranking="lexical", known_at=old).ids()
        # ranked as the same writes rank on SQLite (a real file)
        with erstwhile.open(f"{tmp_path}/same.db", embedder="none",
                            background_jobs=False) as other:  # fmt: skip
            _write(other, "a")
            other.upsert("a", [{"id": "r0", "content": "a lantern by the harbour"},
                               {"id": "r2", "content": "harbour harbour stone"}])  # fmt: skip
            other.delete("a", "n3", hard=True)
            assert _ranked(m, "a") == _ranked(other, "a")
    with psycopg.connect(target) as conn:
        row = conn.execute(
            "SELECT count(*) FROM lexical_docs WHERE namespace = 'a' AND terms LIKE '%harbour%'"
        ).fetchone()
    assert row == (2,)

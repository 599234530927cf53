"""SQLite keys its postings by the merge that wrote them (``seg``, after the namespace):
each merge of the tail appends its postings as a segment of its own, listed per
namespace in ``lexical_segments``, and a search seeks each query term once per merge
of its namespace, never ranging over the namespace's postings. Replacements and hard
deletes of records merged long ago find their postings there; the integrity check
finds postings of a merge their namespace does not list (which no search would see)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.raw import merges_settled, scalar, select

import erstwhile
from erstwhile.store.sqlite import lexical_merge

WORDS = ["river", "stone", "mill", "cloud", "house", "water", "quiet", "old", "road"]


def _content(i: int) -> str:
    return " ".join(WORDS[j % len(WORDS)] for j in range(i, i + 2 + i % 3))


@pytest.fixture
def merged_thrice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, erstwhile.Memory]]:
    """A store whose namespaces "a" and "b" were merged three times (a merge at every
    write of 10 records, two namespaces in each merge), with a last write in the tail."""
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 10)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 10)
    path = str(tmp_path / "m.db")
    with erstwhile.open(path, embedder="none", background_jobs=False) as m:
        for batch in range(3):
            for ns in ("a", "b"):
                m.upsert(ns, [{"id": f"r{batch}-{i}", "content": _content(batch * 5 + i)}
                              for i in range(5)])  # fmt: skip
            merges_settled(m)
        m.upsert("a", [{"id": "late", "content": "river lantern"}])
        merges_settled(m)
        yield path, m


def test_each_merge_appends_a_segment_of_its_own(
    merged_thrice: tuple[str, erstwhile.Memory],
) -> None:
    path, m = merged_thrice
    segments = select(path, "SELECT namespace, seg FROM lexical_segments ORDER BY namespace, seg")
    by_ns = {ns: [seg for n, seg in segments if n == ns] for ns in ("a", "b")}
    assert len(by_ns["a"]) == 3 and by_ns["a"] == by_ns["b"]  # one merge held both
    # a merge's postings are of the records it merged: the batch of each segment
    held = select(path, "SELECT DISTINCT p.seg, substr(r.id, 1, 2) FROM lexical_postings p"
                       " JOIN records r ON r.rowid = p.record ORDER BY p.seg")  # fmt: skip
    assert [batch for _, batch in held] == ["r0", "r1", "r2"]
    assert [seg for seg, _ in held] == by_ns["a"]
    # the last write is in the tail, in no segment
    assert scalar(path, "SELECT count(*) FROM lexical_postings p JOIN records r"
                        " ON r.rowid = p.record WHERE r.id = 'late'") == 0  # fmt: skip
    assert m.search("a", "lantern", ranking="lexical").ids() == ["late"]
    assert all(f.ok for f in m.service.store.integrity())


def test_rewrites_and_hard_deletes_reach_the_first_segment(
    merged_thrice: tuple[str, erstwhile.Memory],
) -> None:
    path, m = merged_thrice
    first = "SELECT count(*) FROM lexical_postings p JOIN records r ON r.rowid = p.record"
    assert scalar(path, f"{first} WHERE r.namespace = 'a' AND r.id = 'r0-1'") > 0
    m.upsert("a", [{"id": "r0-1", "content": "lantern"}])  # its old terms leave segment 1
    m.delete("a", "r0-2", hard=True)
    merges_settled(m)
    for rid in ("r0-1", "r0-2"):
        assert scalar(path, f"{first} WHERE r.namespace = 'a' AND r.id = '{rid}'") == 0
    assert sorted(m.search("a", "lantern", ranking="lexical").ids()) == ["late", "r0-1"]
    assert "r0-1" not in m.search("a", _content(1), ranking="lexical", top_k=50).ids()
    assert all(f.ok for f in m.service.store.integrity())


#: A step of a query plan that reads a postings table (aliased p, or by its name).
_POSTINGS_STEP = re.compile(r"^(SEARCH|SCAN) (lexical_postings|p)\b.*")
_BY_MERGE = re.compile(r"PRIMARY KEY \(namespace=\? AND seg=\? AND term=\?")
#: past_postings's (known_at): keyed by term after the namespace, which
#: lexical_postings's key (namespace, seg, term, record) can never give
_PAST = re.compile(r"PRIMARY KEY \(namespace=\? AND term=\?")


def test_a_search_seeks_each_term_once_per_merge(
    merged_thrice: tuple[str, erstwhile.Memory],
) -> None:
    path, m = merged_thrice
    statements: list[str] = []
    conn = m.service.store.db.conn()
    conn.set_trace_callback(statements.append)
    known = m.get("a", "r1-1").updated_at
    m.search("a", "river stone", ranking="lexical")  # the scope decided by the copy
    m.search("a", "river stone", ranking="lexical", as_of="2020-01-01T00:00:00Z")
    m.search("a", "river stone", ranking="lexical", known_at=known)
    conn.set_trace_callback(None)
    plain = sqlite3.connect(path)
    steps = [
        step
        for sql in statements
        if "lexical_postings" in sql
        for *_, step in plain.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
        if _POSTINGS_STEP.match(step)
    ]
    plain.close()
    assert sum(bool(_BY_MERGE.search(step)) for step in steps) >= 3, statements
    assert all(_BY_MERGE.search(step) or _PAST.search(step) for step in steps), steps


def test_integrity_finds_postings_of_a_merge_their_namespace_does_not_list(
    merged_thrice: tuple[str, erstwhile.Memory],
) -> None:
    _, m = merged_thrice
    conn = m.service.store.db.conn()
    conn.execute("DELETE FROM lexical_segments WHERE namespace = 'b'"
                 " AND seg = (SELECT min(seg) FROM lexical_segments)")  # fmt: skip
    failed = {f.name: f.problems for f in m.service.store.integrity() if not f.ok}
    assert list(failed) == ["full-text index"]
    assert any("postings of no merge of their namespace" in p for p in failed["full-text index"])

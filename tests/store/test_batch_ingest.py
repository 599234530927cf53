"""A batch written in one upsert leaves what the same records written one by one leave:
the same postings, term counts and statistics, the same rankings, on every backend;
and SQLite's tail (documents not merged into postings yet), merged or not, ranks as
one postings table would."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import pg
from tests.support.raw import (
    backend_of,
    dump_tables,
    merges_settled,
    scalar,
    select,
    tail_postings,
)

import erstwhile
from erstwhile.store.sqlite import lexical_merge

START = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["river", "stone", "mill", "cloud", "house", "water", "quiet", "old", "road", "tree"]
_names = itertools.count()


@pytest.fixture(scope="module")
def stores(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: pg.PgServer
) -> Iterator[dict[str, erstwhile.Memory]]:
    """One store per backend for the module, by its target; each example writes
    namespaces of its own (statistics are per namespace, so examples never meet)."""
    targets = [str(tmp_path_factory.mktemp("batch") / "m.db"), postgres_server.new_target()]
    opened = {t: erstwhile.open(t, embedder="none", background_jobs=False) for t in targets}
    yield opened
    for m in opened.values():
        m.close()
    postgres_server.drop_target(targets[1])


def _lexical_rows(target: str, namespace: str) -> dict[str, list[tuple[Any, ...]]]:
    """The namespace's postings (merged, and SQLite's tail's as they would be), term
    counts and statistics; records by id rather than rowid, so two namespaces compare."""
    rows = dump_tables(target, ["lexical_postings", "lexical_terms", "lexical_stats", "records"])
    tail = tail_postings(target) if backend_of(target) == "sqlite" else []
    ids = dict(select(target, "SELECT rowid, id FROM records"))
    postings = sorted(
        (row[1], ids[row[2]], row[3], row[4])
        for row in [*rows["lexical_postings"], *tail]
        if row[0] == namespace
    )
    # each term's df: SQLite's tail counts in lexical_terms once merged
    df = Counter({row[1]: row[2] for row in rows["lexical_terms"] if row[0] == namespace})
    df.update(row[1] for row in tail if row[0] == namespace)
    terms = sorted(df.items())
    stats = [row[1:] for row in rows["lexical_stats"] if row[0] == namespace]
    return {"postings": postings, "terms": terms, "stats": stats}


def _ranked(m: erstwhile.Memory, namespace: str, query: str, **options: Any) -> list[Any]:
    found = m.search(namespace, query, ranking="lexical", top_k=50, **options)
    return [(hit.record.id, hit.score) for hit in found.hits]


text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
# (id index, text, supersedes an earlier index or None)
writes = st.lists(
    st.tuples(st.integers(0, 9), text, st.one_of(st.none(), st.integers(0, 9))),
    min_size=1,
    max_size=12,
)


def _records(first: list[str], batch: list[tuple[int, str, int | None]]) -> list[dict[str, Any]]:
    """The batch as records: an id written before is an update of it; ``supersedes``
    only names a record written before this batch, not superseded yet in this batch."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for n, (index, content, old) in enumerate(batch):
        rid = f"r{index}"
        if rid in seen:
            continue  # one write per id in one batch
        seen.add(rid)
        valid_from = (START + timedelta(days=n + 1)).isoformat()
        record: dict[str, Any] = {"id": rid, "content": content, "valid_from": valid_from}
        if old is not None and f"r{old}" in first and f"r{old}" != rid:
            record["supersedes"] = [f"r{old}"]
        out.append(record)
    return out


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    first=st.lists(text, min_size=1, max_size=8), batch=writes, queries=st.lists(text, max_size=3)
)
def test_a_batch_leaves_what_one_by_one_writes_leave(
    stores: dict[str, erstwhile.Memory],
    first: list[str],
    batch: list[tuple[int, str, int | None]],
    queries: list[str],
) -> None:
    """New ids, updates of stored ids (content changed or not) and supersessions in one
    batch: the postings, term counts, statistics and rankings are those of the same
    records written one at a time."""
    n = next(_names)
    base = [{"id": f"r{i}", "content": c, "valid_from": START.isoformat()}
            for i, c in enumerate(first)]  # fmt: skip
    records = _records([r["id"] for r in base], batch)
    chained = {r["supersedes"][0] for r in records if "supersedes" in r}
    # a record superseded twice would fork a chain: refused, in both ways of writing
    records = [r for r in records if "supersedes" not in r or r["id"] not in chained]
    olds = [r["supersedes"][0] for r in records if "supersedes" in r]
    if len(olds) != len(set(olds)):
        return
    for target, m in stores.items():
        together, alone = f"t{n}", f"o{n}"
        m.upsert(together, base)
        m.upsert(alone, base)
        try:
            m.upsert(together, records)
        except erstwhile.ErstwhileError as error:  # then one by one fails at some record
            with pytest.raises(type(error)):
                for record in records:
                    m.upsert(alone, [record])
            continue
        for record in records:
            m.upsert(alone, [record])
        assert _lexical_rows(target, together) == _lexical_rows(target, alone)
        for query in [*queries, "river stone"]:
            assert _ranked(m, together, query) == _ranked(m, alone, query)


def test_a_bad_record_in_the_middle_of_a_batch_writes_nothing(
    memory: erstwhile.Memory, store_target: str
) -> None:
    memory.upsert("ns", [{"id": "a", "content": "the old mill"}])
    before = dump_tables(store_target)
    batch = [
        {"id": "b", "content": "a new record"},
        {"id": "a", "content": "the old mill, rewritten"},
        {"id": "c", "content": "x", "valid_from": "2024-02-01", "valid_to": "2024-01-01"},
        {"id": "d", "content": "after the bad one"},
    ]
    with pytest.raises(erstwhile.InvalidInput, match=r"records\[2\]"):
        memory.upsert("ns", batch)
    duplicate = [{"id": "e", "content": "one"}, {"id": "e", "content": "two"}]
    with pytest.raises(erstwhile.InvalidInput, match=r"records\[1\].id 'e' appears twice"):
        memory.upsert("ns", duplicate)
    missing = [{"id": "f", "content": "new"}, {"id": "g", "content": "n", "supersedes": ["zz"]}]
    with pytest.raises(erstwhile.NotFound, match=r"records\[1\].supersedes\[0\]"):
        memory.upsert("ns", missing)
    assert dump_tables(store_target) == before


# -- SQLite's tail (documents not merged yet) ---------------------------------------


def _workload(m: erstwhile.Memory) -> None:
    """Creates, content rewrites, supersessions, tombstones and hard deletes, in
    batches, across two namespaces."""
    for ns in ("a", "b"):
        m.upsert(ns, [{"id": f"r{i}", "content": " ".join(WORDS[i % 7 : i % 7 + 3]),
                       "valid_from": START.isoformat()} for i in range(20)])  # fmt: skip
        m.upsert(ns, [{"id": "r1", "content": "quiet road by the water"},
                      {"id": "r2", "content": WORDS[2] + " " + WORDS[3]},
                      {"id": "s3", "content": "a tree by the mill", "supersedes": ["r3"],
                       "valid_from": (START + timedelta(days=1)).isoformat()}])  # fmt: skip
        m.delete(ns, "r4")
        m.delete(ns, "r5", hard=True)
        m.upsert(ns, [{"id": f"n{i}", "content": f"{WORDS[i % 10]} stone"} for i in range(15)])
        m.upsert(ns, [{"id": "n3", "content": "an old house"}])
        m.delete(ns, "n4", hard=True)


def test_the_tail_merged_or_not_ranks_as_one_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same writes with a merge after nearly every write, and with none: the same
    rankings to the last bit (as of now and as known at a past instant), a clean
    integrity check, and the same postings in all."""
    found: dict[str, Any] = {}
    for name, limit in (("merged", 3), ("unmerged", 10**9)):
        monkeypatch.setattr(lexical_merge, "TAIL_ROWS", limit)
        monkeypatch.setattr(lexical_merge, "TAIL_MAX", limit)
        path = tmp_path / f"{name}.db"
        with erstwhile.open(str(path), embedder="none", background_jobs=False) as m:
            m.upsert("a", [{"id": "early", "content": "river stone early"}])
            known = m.get("a", "early").updated_at
            _workload(m)
            found[name] = {
                "ranked": [_ranked(m, ns, q) for ns in ("a", "b")
                           for q in ("river", "stone mill", "quiet water", "old house tree")],
                "known": [_ranked(m, "a", q, known_at=known) for q in ("river", "stone")],
                "rows": [_lexical_rows(str(path), ns) for ns in ("a", "b")],
            }  # fmt: skip
            report = m.service.store.integrity()
            assert all(f.ok for f in report), [f.problems for f in report]
            merges_settled(m)
            tail = scalar(str(path), "SELECT count(*) FROM lexical_tail")
            if name == "merged":
                assert tail < 3  # merged once a write filled it
                assert scalar(str(path), "SELECT count(*) FROM lexical_postings") > 0
            else:
                assert scalar(str(path), "SELECT count(*) FROM lexical_postings") == 0
    assert found["merged"] == found["unmerged"]
    assert any(found["merged"]["ranked"]) and any(found["merged"]["known"])


def test_integrity_finds_a_record_with_postings_and_in_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with erstwhile.open(str(path), embedder="none", background_jobs=False) as m:
        m.upsert("ns", [{"id": "a", "content": "river stone"}])
        conn = m.service.store.db.conn()
        conn.execute("INSERT INTO lexical_postings (namespace, term, record, tf, length)"
                     " SELECT namespace, 'river', record, 1, 2 FROM lexical_docs")  # fmt: skip
        conn.execute("INSERT INTO lexical_segments (namespace, seg) VALUES ('ns', 0)")
        failed = [f for f in m.service.store.integrity() if not f.ok]
    assert [f.name for f in failed] == ["full-text index"]


def test_a_larger_store_merges_its_tail_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound grows as the square root of the merged documents (lexical_merge.merge_due):
    with 200 merged, the tail waits until 4 * tail^2 >= TAIL_ROWS * 200, and ranking
    never depends on where a document is."""
    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 10)
    path = tmp_path / "m.db"
    content = "river stone mill quiet water"
    with erstwhile.open(str(path), embedder="none", background_jobs=False) as m:
        m.upsert("a", [{"id": f"r{i}", "content": content} for i in range(200)])
        tail = partial(scalar, str(path), "SELECT count(*) FROM lexical_tail")
        assert tail() == 0  # nothing merged yet: due at the first bound
        seen = []
        for i in range(25):
            m.upsert("a", [{"id": f"n{i}", "content": content}])
            merges_settled(m)  # a due merge is made beside the writer
            seen.append(tail())
            assert len(m.search("a", "mill", ranking="lexical", top_k=300).hits) == 201 + i
        assert seen == [*range(1, 23), 0, 1, 2]  # due at 23: 4 * 529 >= 2,000
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]

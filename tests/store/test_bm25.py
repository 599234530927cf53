"""The lexical lane ranks by BM25 with each namespace's own statistics, identically on
SQLite and PostgreSQL, and equal to a brute-force BM25 written here from its definition
(k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), N and the mean length
over every record of the namespace, the scope deciding only which records are ranked).

Words are erstwhile's terms (:mod:`erstwhile.domain.words`); the oracle uses that
tokeniser and nothing else of the store.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from tests.support import pg
from tests.support.raw import merges_settled

import erstwhile
from erstwhile import backups
from erstwhile.domain.words import terms
from erstwhile.store.sqlite import lexical_merge

VOCABULARY = [
    "run", "runs", "running", "ran", "river", "rivers", "stone", "stones", "cloud",
    "Clouds", "café", "cafe", "ember", "the", "and", "of", "what", "did",
]  # fmt: skip
K1, B = 1.2, 0.75
_names = itertools.count()


def oracle(corpus: dict[str, str], query: str, visible: set[str]) -> dict[str, float]:
    """BM25 of every visible record matching any query term, from the definition."""
    docs = {rid: Counter(terms(text, "english")) for rid, text in corpus.items()}
    n = len(docs)
    mean = sum(sum(c.values()) for c in docs.values()) / n
    wanted = set(terms(query, "english"))
    scores: dict[str, float] = {}
    for rid, counts in docs.items():
        if rid not in visible or not wanted & counts.keys():
            continue
        length = sum(counts.values())
        score = 0.0
        for term in wanted & counts.keys():
            df = sum(1 for c in docs.values() if term in c)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = counts[term]
            score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / mean))
        scores[rid] = score
    return scores


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: pg.PgServer
) -> Iterator[dict[str, erstwhile.Memory]]:
    """One SQLite store and one PostgreSQL store for the module; each example writes a
    namespace of its own (statistics are per namespace, so examples cannot meet)."""
    server = postgres_server
    target = server.new_target()
    path = tmp_path_factory.mktemp("bm25") / "m.db"
    stores = {
        "sqlite": erstwhile.open(str(path), embedder="none", background_jobs=False),
        "postgres": erstwhile.open(target, embedder="none", background_jobs=False),
    }
    yield stores
    for m in stores.values():
        m.close()
    server.drop_target(target)


def ranked(m: erstwhile.Memory, namespace: str, query: str, top_k: int) -> list[tuple[str, float]]:
    found = m.search(namespace, query, ranking="lexical", top_k=top_k)
    return [(hit.record.id, hit.score) for hit in found.hits]


text = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=10).map(" ".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    corpus=st.lists(text, min_size=1, max_size=14),
    rewrites=st.lists(st.tuples(st.integers(0, 13), text), max_size=3),
    removed=st.sets(st.integers(0, 13), max_size=3),
    hidden=st.sets(st.integers(0, 13), max_size=3),
    queries=st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4), min_size=1,
                     max_size=4),
)  # fmt: skip
@pytest.mark.parametrize("tail", [None, 2], ids=["sqlite-tail", "sqlite-merged-each-write"])
def test_both_backends_rank_as_the_oracle(
    both: dict[str, erstwhile.Memory],
    monkeypatch: pytest.MonkeyPatch,
    tail: int | None,
    corpus: list[str],
    rewrites: list[tuple[int, str]],
    removed: set[int],
    hidden: set[int],
    queries: list[list[str]],
) -> None:
    """``tail``: SQLite's tail merged at that many rows (each merge a segment of the
    postings of its own, which rewrites and hard deletes reach into), or never."""
    if tail is not None:
        monkeypatch.setattr(lexical_merge, "TAIL_ROWS", tail)
        monkeypatch.setattr(lexical_merge, "TAIL_MAX", tail)
    namespace = f"bm{next(_names)}"
    contents = {f"r{i:02d}": content for i, content in enumerate(corpus)}
    for m in both.values():
        m.upsert(namespace, [{"id": rid, "content": c} for rid, c in contents.items()])
        for index, content in rewrites:  # a changed content replaces the record's terms
            if f"r{index:02d}" in contents:
                m.upsert(namespace, [{"id": f"r{index:02d}", "content": content}])
        for index in removed:  # a hard delete leaves the statistics
            if f"r{index:02d}" in contents:
                m.delete(namespace, f"r{index:02d}", hard=True)
        for index in hidden:  # a tombstone only leaves the scope
            if f"r{index:02d}" in contents and index not in removed:
                m.delete(namespace, f"r{index:02d}")
    merges_settled(both["sqlite"])
    if tail is not None and len(corpus) >= tail:
        segments = (
            both["sqlite"]
            .service.store.db.conn()
            .execute("SELECT count(*) FROM lexical_segments WHERE namespace = ?", (namespace,))
            .fetchone()[0]
        )
        assert segments >= 1
    for index, content in rewrites:
        if f"r{index:02d}" in contents:
            contents[f"r{index:02d}"] = content
    for index in removed:
        contents.pop(f"r{index:02d}", None)
    visible = {rid for rid in contents if int(rid[1:]) not in hidden}
    for words in queries:
        query = " ".join(words)
        sqlite = ranked(both["sqlite"], namespace, query, 50)
        assert ranked(both["postgres"], namespace, query, 50) == sqlite  # to the last bit
        for top_k in (1, 3):
            assert ranked(both["postgres"], namespace, query, top_k) == sqlite[:top_k]
            assert ranked(both["sqlite"], namespace, query, top_k) == sqlite[:top_k]
        expected = oracle(contents, query, visible) if contents else {}
        assert {rid for rid, _ in sqlite} == set(expected)
        for rid, score in sqlite:
            assert score == pytest.approx(expected[rid], abs=1e-6)
        scores = [score for _, score in sqlite]
        assert scores == sorted(scores, reverse=True)
        for (a, sa), (b, sb) in itertools.pairwise(sqlite):
            assert sa > sb or a < b  # ties by id


def test_one_namespace_never_moves_another_s_scores(memory: erstwhile.Memory) -> None:
    memory.upsert("a", [{"id": f"a{i}", "content": c} for i, c in enumerate(
        ["the river runs", "a stone in the river", "clouds over the stone"])])  # fmt: skip
    before = ranked(memory, "a", "river stone", 10)
    memory.upsert("b", [{"id": f"b{i}", "content": "river " * (i % 3 + 1)} for i in range(30)])
    assert ranked(memory, "a", "river stone", 10) == before
    alone = erstwhile.open(":memory:", embedder="none", background_jobs=False)
    alone.upsert("a", [{"id": f"a{i}", "content": c} for i, c in enumerate(
        ["the river runs", "a stone in the river", "clouds over the stone"])])  # fmt: skip
    assert ranked(alone, "a", "river stone", 10) == before
    alone.close()


def test_words_match_the_way_people_write_them(memory: erstwhile.Memory) -> None:
    memory.upsert("ns", [
        {"id": "runs", "content": "She runs along the river every morning"},
        {"id": "cafe", "content": "Coffee at the Café Noir"},
        {"id": "other", "content": "Nothing to see here"},
    ])  # fmt: skip
    assert memory.search("ns", "running", ranking="lexical").ids() == ["runs"]
    assert memory.search("ns", "RAN? Ran!", ranking="lexical").ids() == []  # not a stem of run
    assert memory.search("ns", "cafe", ranking="lexical").ids() == ["cafe"]
    assert memory.search("ns", "what did she do", ranking="lexical").ids() == []


def test_a_stop_word_query_finds_nothing_and_says_so(memory: erstwhile.Memory) -> None:
    memory.add("ns", "the and of what")
    found = memory.search("ns", "the of what", ranking="lexical")
    assert found.hits == []
    assert any("no searchable words" in w for w in found.warnings)


def test_a_simple_namespace_neither_stems_nor_drops_words(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        text_search={"exact": "simple"}) as m:  # fmt: skip
        for namespace in ("exact", "english"):
            m.upsert(namespace, [{"id": "1", "content": "The runs"},
                                 {"id": "2", "content": "running"}])  # fmt: skip
        assert m.search("exact", "running", ranking="lexical").ids() == ["2"]
        assert m.search("exact", "the", ranking="lexical").ids() == ["1"]
        assert m.search("english", "running", ranking="lexical").ids() == ["1", "2"]
        before = ranked(m, "english", "running", 10)
    # opening with another language re-indexes what is there, in one transaction
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        text_search={"exact": "english", "english": "simple"}) as m:  # fmt: skip
        assert m.service.store.text_search("exact") == "english"
        assert m.search("exact", "running", ranking="lexical").ids() == ["1", "2"]
        assert ranked(m, "exact", "running", 10) == before
        assert m.search("english", "running", ranking="lexical").ids() == ["2"]
        assert all(f.ok for f in backups.check(m).findings)


def test_an_unknown_language_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(erstwhile.InvalidInput, match="english, simple"):
        erstwhile.open(str(tmp_path / "m.db"), embedder="none", text_search={"ns": "klingon"})

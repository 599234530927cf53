"""Many tags, metadata keys and predicates, on both backends (issue #43, items 8-9).

Over a cap, a write, search or expire is refused with ``erstwhile.input.invalid`` and
changes nothing; never reported as a storage outage. At the caps a search gives what a
brute-force reading of the scope gives, in every lane; past them (a store driven
directly), the scope's SQL still parses and answers."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

import erstwhile
from erstwhile import Memory
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record, updated
from erstwhile.domain.search import ExpireRequest, SearchRequest
from erstwhile.domain.time import now_us
from erstwhile.domain.validation import (
    MAX_FILTER,
    MAX_METADATA_KEYS,
    MAX_PREDICATES,
    MAX_QUERY_CHARS,
    MAX_TAGS,
)
from erstwhile.store import StorageOptions

NS = "caps"


@pytest.fixture
def memory(store_target: str) -> Iterator[Memory]:
    # a statement PostgreSQL cannot plan in a minute fails the test rather than hang it
    # (a scope of 576 members took minutes to plan while each was a join)
    storage = StorageOptions(statement_timeout=60)
    m = erstwhile.open(store_target, embedder="hash", background_jobs=False, storage=storage)
    yield m
    m.close()


def _refused(call: Any, field: str) -> str:
    with pytest.raises(InvalidInput) as caught:
        call()
    assert field in caught.value.message, caught.value.message
    return caught.value.message


def test_over_the_caps_a_write_is_refused_and_changes_nothing(memory: Memory) -> None:
    tags = [f"t{i}" for i in range(100_000)]
    _refused(lambda: memory.upsert(NS, [{"id": "a", "content": "x", "tags": tags}]),
             "records[0].tags")  # fmt: skip
    meta = {f"k{i}": "v" for i in range(MAX_METADATA_KEYS + 1)}
    _refused(lambda: memory.upsert(NS, [{"id": "a", "content": "x", "metadata": meta}]),
             "records[0].metadata")  # fmt: skip
    # a record built in code, past the model's checks, meets the service's
    built = Record.model_construct(id="a", content="x", tags=tags[: MAX_TAGS + 1])
    _refused(lambda: memory.upsert(NS, [built]), "records[0].tags")
    assert NS not in memory.service.namespaces()


def test_many_tags_in_a_search_are_bad_input_not_an_outage(memory: Memory) -> None:
    memory.upsert(NS, [{"id": "a", "content": "hello", "tags": ["t0"]}])
    tags = [f"t{i}" for i in range(1_000)]
    for _ in range(3):  # the first searches of a process asked SQL; later ones a copy
        _refused(lambda: memory.search(NS, "hello", tags=tags, ranking="lexical"), "tags")
    preds = [{"key": "n", "op": "GTE", "values": ["1"]}] * (MAX_PREDICATES + 1)
    _refused(lambda: memory.search(NS, "hello", predicates=preds), "predicates")
    _refused(lambda: memory.expire(NS, tags=tags, max_rows=1), "tags")
    built = SearchRequest.model_construct(query="hello", tags=tags, filter={}, predicates=[])
    _refused(lambda: memory.service.search(NS, built), "tags")
    assert memory.get(NS, "a").valid_to is None


def _in_scope(record: dict[str, Any], tags: list[str], where: dict[str, str],
              preds: list[dict[str, Any]]) -> bool:  # fmt: skip
    meta = record["metadata"]
    return (
        all(tag in record["tags"] for tag in tags)
        and all(meta.get(key) == value for key, value in where.items())
        and all(key in meta and float(meta[key]) >= float(p["values"][0])
                for p in preds for key in [p["key"]])
    )  # fmt: skip


def test_a_scope_at_every_cap_answers_as_the_oracle(memory: Memory) -> None:
    rng = random.Random(43)
    tags = [f"t{i}" for i in range(MAX_TAGS)]
    meta = {f"k{i}": str(i) for i in range(MAX_FILTER)}
    sizes = set()
    records = []
    for n in range(12):
        dropped = rng.sample(range(MAX_TAGS), n % 3)  # a third hold every tag
        held = dict(meta)  # and more keys, up to a record's cap
        held.update({f"extra{i}": "x" for i in range(MAX_METADATA_KEYS - MAX_FILTER)})
        if n % 4 == 1:  # out of the filter and under a predicate
            held["k7"] = "6"
        elif n % 4 == 2:  # out of the filter on a key no predicate tests
            held["k100"] = "99"
        records.append({
            "id": f"r{n}", "content": f"hello record {n}",
            "tags": [t for i, t in enumerate(tags) if i not in dropped], "metadata": held,
        })  # fmt: skip
    memory.upsert(NS, records)
    where = dict(list(meta.items())[:MAX_FILTER])
    preds = [{"key": f"k{i}", "op": "GTE", "values": [str(i)]} for i in range(MAX_PREDICATES)]
    for scope in (
        {"tags": tags, "filter": where, "predicates": preds},
        {"tags": tags, "filter": dict(list(meta.items())[:8]), "predicates": preds},
        {"tags": tags[:5], "predicates": preds[:3]},
    ):
        expected = {
            r["id"] for r in records
            if _in_scope(r, scope["tags"], scope.get("filter", {}), scope["predicates"])
        }  # fmt: skip
        sizes.add(len(expected))
        for options in ({"ranking": "lexical"}, {"ranking": "semantic"},
                        {"ranking": "lexical", "known_at": "2999-01-01"}):  # fmt: skip
            for _ in range(3):  # SQL first, then the scope copy where a backend has one
                found = memory.search(NS, "hello", top_k=50, **scope, **options)
                assert set(found.ids()) == expected, (options, len(scope["tags"]))
    assert len(sizes) == 3 and 0 not in sizes  # the scopes tell the records apart
    everything = {"tags": tags, "filter": where, "predicates": preds}
    matching = sum(_in_scope(r, tags, where, preds) for r in records)
    assert memory.expire(NS, action="invalidate", max_rows=100, **everything) == matching


def test_past_the_caps_the_store_still_parses_the_scope(memory: Memory) -> None:
    """The caps keep a scope's SQL shallow; the SQL does not rely on them: 1,500 tag
    members (a depth of 1,500 ANDs in a row) still parse on SQLite, and plan on
    PostgreSQL."""
    tags = [f"t{i}" for i in range(1_500)]
    record = updated(Record(id="many", content="hello"), {"tags": tags})
    store = memory.service.store
    store.upsert(NS, [record], now=now_us(), actor="local")
    scope = ExpireRequest.model_construct(
        tags=tags, filter={}, predicates=[], kind=None, key=None, all=False,
        action="invalidate", max_rows=5,
    )  # fmt: skip
    assert store.expire(NS, scope, now=now_us(), actor="local") == 1


def test_a_query_at_its_cap_of_distinct_words_answers_in_every_lane(memory: Memory) -> None:
    """The most distinct words a query's cap allows (~16,000 of three characters: more
    than any statement's bound variables would take one each) reach every lane, which
    finds the record holding one of them; past the cap the search is bad input."""
    memory.upsert(NS, [{"id": "a", "content": "a note on zq7 and more"},
                       {"id": "b", "content": "nothing alike"}])  # fmt: skip
    chars = "abcdefghijklmnopqrstuvwxyz0123456789"
    words = [f"{a}{b}{c}" for a in chars for b in chars for c in chars]
    random.Random(3).shuffle(words)
    query = " ".join(["zq7", *words])[:MAX_QUERY_CHARS]
    assert len(set(query.split())) > 16_000
    for ranking in ("lexical", "hybrid", "semantic"):
        hits = memory.search(NS, query, ranking=ranking, top_k=2).hits
        assert hits, ranking
        if ranking == "lexical":
            assert [h.record.id for h in hits] == ["a"]
    _refused(lambda: memory.search(NS, query + " " + query), "query")

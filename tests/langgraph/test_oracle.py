"""ErstwhileStore against LangGraph's InMemoryStore as the oracle: after the same puts
and deletes (namespace labels of any characters, wildcard-looking ones included), the
listings, filtered searches and gets agree exactly, on both backends."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

import erstwhile
from erstwhile.langgraph import ErstwhileStore
from erstwhile.langgraph.mapping import encode_scalar, filter_scope

# labels that an escaping scheme or a LIKE pattern would get wrong
LABELS = ["a", "b", "A", "é", "*", "x y", "%", "_", '"', "[0]", "ns", "a_b"]
label = st.sampled_from(LABELS)
namespace = st.lists(label, min_size=1, max_size=3).map(tuple)
value = st.fixed_dictionaries(
    {
        "n": st.integers(0, 3),
        "s": st.sampled_from(["x", "y", "3"]),
        "flag": st.booleans(),
        "nested": st.fixed_dictionaries({"k": st.sampled_from(["p", "q"])}),
    }
)
write = st.tuples(namespace, st.sampled_from(["k1", "k2", "ключ"]), st.none() | value)
pattern = st.lists(st.sampled_from([*LABELS[:4], "*"]), min_size=0, max_size=3).map(tuple)
filters = st.sampled_from(
    [
        None,
        {"s": "x"},
        {"s": "3"},
        {"n": 3},
        {"n": 2.0},
        {"flag": True},
        {"n": {"$gt": 1}},
        {"n": {"$lte": 1}, "s": "y"},
        {"n": {"$ne": 2}},  # every value has n: a missing field is where $ne differs
        {"nested": {"k": "q"}},
        {"s": {"$eq": "x"}},
    ]
)


def _items(items: list[Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    return sorted((tuple(i.namespace), i.key, repr(sorted(i.value.items()))) for i in items)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(write, min_size=1, max_size=10),
    prefix=pattern,
    suffix=pattern,
    max_depth=st.none() | st.integers(1, 3),
    offset=st.integers(0, 3),
    limit=st.integers(1, 5),
    search_prefix=st.lists(label, max_size=2).map(tuple),
    filter=filters,
)
def test_agrees_with_the_in_memory_store(
    memory: erstwhile.Memory,
    writes: list[tuple[tuple[str, ...], str, Any]],
    prefix: tuple[str, ...],
    suffix: tuple[str, ...],
    max_depth: int | None,
    offset: int,
    limit: int,
    search_prefix: tuple[str, ...],
    filter: dict[str, Any] | None,
) -> None:
    ours = ErstwhileStore(memory, namespace="lg-" + uuid.uuid4().hex[:12])
    oracle = InMemoryStore()
    for ns, key, val in writes:
        for store in (ours, oracle):
            if val is None:
                store.delete(ns, key)
            else:
                store.put(ns, key, val)
    # InMemoryStore lists a namespace once anything touched it, even a delete of a key
    # it never held (its dict of namespaces is a defaultdict); a namespace here is one
    # that holds an item, as in LangGraph's PostgreSQL store
    for empty in [ns for ns, items in oracle._data.items() if not items]:
        del oracle._data[empty]
    listing = {
        "prefix": prefix or None,
        "suffix": suffix or None,
        "max_depth": max_depth,
        "limit": limit,
        "offset": offset,
    }
    assert ours.list_namespaces(**listing) == oracle.list_namespaces(**listing)
    assert ours.list_namespaces() == oracle.list_namespaces()
    # PostgreSQL's LangGraph store and this one order unranked results newest first,
    # the in-memory one by insertion: compare what is found, not the order
    found = ours.search(search_prefix, filter=filter, limit=100)
    expected = oracle.search(search_prefix, filter=filter, limit=100)
    assert _items(found) == _items(expected)
    for ns, key, _ in writes:
        mine, theirs = ours.get(ns, key), oracle.get(ns, key)
        assert (mine and mine.value) == (theirs and theirs.value)


def test_paging_a_listing_walks_it_once(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory)
    for n in range(7):
        store.put(("docs", str(n % 3)), f"k{n}", {"n": n})
    full = [(i.namespace, i.key) for i in store.search(("docs",), limit=100)]
    paged = [
        (i.namespace, i.key)
        for offset in range(0, 7, 2)
        for i in store.search(("docs",), limit=2, offset=offset)
    ]
    assert len(full) == 7 and paged == full


@pytest.mark.parametrize(
    ("given_value", "text"),
    [(3, "3"), (3.0, "3"), (2.5, "2.5"), (True, "true"), ("3", '"3"'), (None, "null"),
     ([1, "a"], '[1,"a"]')],
)  # fmt: skip
def test_filter_values_are_typed(given_value: Any, text: str) -> None:
    assert encode_scalar(given_value) == text


def test_an_unknown_filter_operator_is_refused() -> None:
    with pytest.raises(erstwhile.InvalidInput, match=r"\$regex"):
        filter_scope({"s": {"$regex": "x.*"}})
    with pytest.raises(erstwhile.InvalidInput, match="compares numbers"):
        filter_scope({"n": {"$gt": "many"}})


def test_index_embed_is_erstwhiles_embedder(memory: erstwhile.Memory) -> None:
    with pytest.raises(erstwhile.InvalidInput, match="LangChainEmbedder"):
        ErstwhileStore(memory, index={"dims": 3, "embed": "fake:model"})  # type: ignore[typeddict-item]


def test_a_value_must_be_json(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory)
    with pytest.raises(erstwhile.InvalidInput, match="JSON"):
        store.put(("a",), "k", {"when": object()})
    assert store.get(("a",), "k") is None


def test_concurrent_puts_of_one_key_keep_every_value(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory)

    def writer(name: str) -> None:
        for n in range(8):
            store.put(("shared",), "counter", {"by": name, "n": n})

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = [item.value for item in store.history(("shared",), "counter")]
    # one chain: erstwhile refuses a fork, the loser re-reads and supersedes the winner
    # (each refusal is one put of the other writer, so 8 at most: under PUT_ATTEMPTS)
    assert sorted((v["by"], v["n"]) for v in history) == sorted(
        (name, n) for name in ("a", "b") for n in range(8)
    )
    current = store.get(("shared",), "counter")
    assert current is not None and current.value == history[-1]
    assert [i.key for i in store.search(("shared",))] == ["counter"]


def test_index_dims_must_be_erstwhiles(memory: erstwhile.Memory) -> None:
    dims = memory.embedder_id("langgraph").rsplit(":", 1)[-1]
    ErstwhileStore(memory, index={"dims": int(dims), "fields": ["text"]})
    with pytest.raises(erstwhile.InvalidInput, match=r"index\.dims"):
        ErstwhileStore(memory, index={"dims": int(dims) + 1})


def test_long_keys_and_labels(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory)
    namespace, key = ("users", "x" * 2000), "k" * 3000
    store.put(namespace, key, {"text": "a long one"})
    store.put(namespace, key, {"text": "a long one, revised"})
    assert store.get(namespace, key).value == {"text": "a long one, revised"}  # type: ignore[union-attr]
    assert [i.value["text"] for i in store.history(namespace, key)] == [
        "a long one",
        "a long one, revised",
    ]
    assert store.list_namespaces(prefix=("users",)) == [namespace]

"""A LangGraph graph, end to end, with erstwhile as its store: deterministic nodes
(no LLM) write and read memories, on SQLite and on PostgreSQL (``memory`` fixture)
and through ``erstwhile.Client`` against a real ``erstwhile serve``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from tests.server.harness import make_tokens, start_server, write_config

import erstwhile
from erstwhile.langgraph import ErstwhileStore
from erstwhile.langgraph import mapping as m


class State(TypedDict, total=False):
    user: str
    fact: str
    recalled: list[str]
    known: str


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Files the turn's fact as the user's current car."""
    store.put(("users", state["user"], "facts"), "car", {"text": state["fact"]})
    return {}


def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Reads back by key and by search, as an agent's next step would."""
    item = store.get(("users", state["user"], "facts"), "car")
    hits = store.search(("users", state["user"]), query="car")
    return {
        "known": item.value["text"] if item else "",
        "recalled": [hit.value["text"] for hit in hits],
    }


def build(store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def run_conversation(memory: Any, namespace: str, store: ErstwhileStore) -> None:
    graph = build(store)
    first = graph.invoke({"user": "ada", "fact": "Ada drives a red car"})
    assert first["known"] == "Ada drives a red car"
    assert first["recalled"] == ["Ada drives a red car"]
    between = datetime.now(UTC)
    time.sleep(0.01)
    second = graph.invoke({"user": "ada", "fact": "Ada sold the red car and drives a blue car"})
    assert second["known"] == "Ada sold the red car and drives a blue car"
    # the put superseded the old value: the search sees only the current one
    assert second["recalled"] == ["Ada sold the red car and drives a blue car"]
    other = graph.invoke({"user": "bob", "fact": "Bob rides a bike, no car"})
    assert other["recalled"] == ["Bob rides a bike, no car"]

    # what erstwhile keeps beyond the interface
    history = store.history(("users", "ada", "facts"), "car")
    assert [item.value["text"] for item in history] == [
        "Ada drives a red car",
        "Ada sold the red car and drives a blue car",
    ]
    then = store.search_as_of(("users", "ada"), between, query="car")
    assert [hit.value["text"] for hit in then] == ["Ada drives a red car"]
    past = store.get_as_of(("users", "ada", "facts"), "car", between)
    assert past is not None and past.value["text"] == "Ada drives a red car"
    assert sorted(store.list_namespaces(prefix=("users",))) == [
        ("users", "ada", "facts"),
        ("users", "bob", "facts"),
    ]

    # in erstwhile itself: one record per value, the old one closed by supersession
    records = memory.search(namespace, "car", kind=m.VALUE_KIND, include_historical=True)
    texts = sorted(hit.record.content for hit in records.hits)
    assert texts == sorted(
        ["Ada drives a red car", "Ada sold the red car and drives a blue car",
         "Bob rides a bike, no car"]
    )  # fmt: skip
    old = next(h.record for h in records.hits if h.record.content == "Ada drives a red car")
    assert old.superseded_by is not None and old.valid_to is not None

    # a delete is a soft delete: gone from the store, kept in erstwhile's history
    store.delete(("users", "ada", "facts"), "car")
    assert store.get(("users", "ada", "facts"), "car") is None
    assert build(store).invoke({"user": "bob", "fact": "Bob rides a bike, no car"})["recalled"]
    assert store.list_namespaces(prefix=("users", "ada")) == []
    kept = store.history(("users", "ada", "facts"), "car")
    assert [item.value["text"] for item in kept][-1] == "Ada sold the red car and drives a blue car"
    current = memory.get(namespace, old.superseded_by)
    assert current.deleted_at is not None


def test_graph_end_to_end(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory, namespace="agent", index={"fields": ["text"]})
    run_conversation(memory, "agent", store)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[erstwhile.Client]:
    root: Path = tmp_path_factory.mktemp("langgraph-server")
    server = start_server(root / "server.db", write_config(root / "erstwhile.toml"))
    try:
        with erstwhile.Client(server.url, token=make_tokens(server).writer) as remote:
            yield remote
    finally:
        server.stop()


def test_graph_end_to_end_over_the_client(client: erstwhile.Client) -> None:
    # the test server caps top_k at 50: the store's listings are sized to it
    store = ErstwhileStore(client, namespace="agent", index={"fields": ["text"]}, scan_limit=50)
    run_conversation(client, "agent", store)


def test_a_listing_over_the_scan_limit_is_refused(memory: erstwhile.Memory) -> None:
    store = ErstwhileStore(memory, scan_limit=3)
    for n in range(3):
        store.put(("notes",), f"n{n}", {"text": f"note {n}"})
    with pytest.raises(erstwhile.PolicyLimit, match="scan_limit"):
        store.list_namespaces()
    store.delete(("notes",), "n0")
    assert store.list_namespaces() == [("notes",)]

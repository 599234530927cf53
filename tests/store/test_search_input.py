"""Search and write input: bad requests get the SPEC code and name the field."""

from __future__ import annotations

import pytest

import erstwhile
from erstwhile import Memory


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.search("ns", "x", predicates=[{"key": "p", "op": "ABOUT", "values": ["1"]}]),
         "predicates[0].op"),
        (lambda m: m.search("ns", "x", predicates=[{"key": "p", "op": "GT", "values": ["ten"]}]),
         "predicates[0]"),
        (lambda m: m.search("ns", "x", between={"from": "2024-02-01", "until": "2024-01-01"}),
         "between"),
        (lambda m: m.search("ns", "x", between={"from": "2024-01-01", "until": "2024-01-01"}),
         "between"),
        (lambda m: m.search("ns", "x", between={"from": "2024-01-01"}), "until"),
        (lambda m: m.search("ns", "x", between={"until": "2024-01-01"}), "from"),
        (lambda m: m.search("ns", "x", as_of="2024-01-01",
                            between={"from": "2024-01-01", "until": "2024-02-01"}), "as_of"),
        (lambda m: m.search("ns", "x", as_of="yesterday"), "as_of"),
        (lambda m: m.search("ns", "x", top_k=0), "top_k"),
        (lambda m: m.search("ns", "x", colour="red"), "colour"),
        (lambda m: m.search("ns"), "query"),
        (lambda m: m.search("", "x"), "namespace"),
        (lambda m: m.search("Bad Name", "x"), "namespace"),
        (lambda m: m.upsert("", [{"content": "x"}]), "namespace"),
        (lambda m: m.upsert("ns", [{"id": "x" * 257, "content": "x"}]), "records[0].id"),
        (lambda m: m.upsert("ns", [{"content": "x", "valid_from": "2024-13-01"}]),
         "records[0].valid_from"),
        (lambda m: m.upsert("ns", [{"content": "x", "metadata": {"a": {"b": 1}}}]),
         "records[0].metadata.a"),
        (lambda m: m.upsert("ns", [{"content": "x", "valid_from": "2024-02-01",
                                    "valid_to": "2024-01-01"}]), "valid_to"),
        (lambda m: m.upsert("ns", [{"content": "x", "if_version": -1}]), "records[0].if_version"),
        (lambda m: m.upsert("ns", []), "records"),
        (lambda m: m.get("ns", ""), "id"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_the_field_named(memory: Memory, call, field: str) -> None:  # type: ignore[no-untyped-def]
    before = memory.service.store.ledger()
    with pytest.raises(erstwhile.InvalidInput) as error:
        call(memory)
    assert error.value.code == "erstwhile.input.invalid"
    assert field in error.value.message, error.value.message
    assert memory.service.store.ledger() == before


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "car*", "-car", "title:car", "(car", "car)", "car AND", "OR car",
     "NOT car", "NEAR(car bike)", "🚗 car", "", "   ", "🚗", "^car", "c'a'r", "car + bike"],
)  # fmt: skip
def test_fts_syntax_is_searched_as_plain_words(memory: Memory, query: str) -> None:
    rid = memory.add("ns", "my car is red")
    memory.add("ns", "AND OR NOT are words too")
    result = memory.search("ns", query)
    if "car" in query:
        assert rid in result.ids()
    if not any(ch.isalnum() for ch in query):
        assert result.hits == []
        assert any("no searchable words" in w for w in result.warnings)


def test_instants_are_normalised_to_utc_microseconds(memory: Memory) -> None:
    rid = memory.add("ns", "offset", valid_from="2024-05-01T14:30:00.1234567+02:00")
    data = memory.get("ns", rid).to_json()
    assert data["valid_from"] == "2024-05-01T12:30:00.123456Z"
    assert "valid_to" not in data and "deleted_at" not in data  # unset is absent, not null
    assert "key" not in data and "supersedes" not in data


def test_predicates_compare_numbers_numerically_and_skip_non_numbers(memory: Memory) -> None:
    high = memory.add("ns", "task alpha", metadata={"priority": "10"})
    memory.add("ns", "task beta", metadata={"priority": "3"})
    memory.add("ns", "task gamma", metadata={"priority": "urgent"})
    memory.add("ns", "task delta")
    gte = [{"key": "priority", "op": "GTE", "values": [5]}]
    found = memory.search("ns", "task", predicates=gte)
    assert found.ids() == [high]
    neq = memory.search("ns", "task", predicates=[{"key": "priority", "op": "neq", "values": [3]}])
    assert len(neq.hits) == 2  # a predicate only matches where the key is present


def test_semantic_without_an_embedder_is_refused(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none") as memory:
        memory.add("ns", "anything")
        with pytest.raises(erstwhile.SemanticUnavailable):
            memory.search("ns", "anything", ranking="semantic")


def test_graph_expansion_options_are_checked(memory: Memory) -> None:
    memory.add("ns", "a note")
    for bad in ({"hops": 0}, {"hops": 4}, {"limit": 0}, {"depth": 1}):
        with pytest.raises(erstwhile.InvalidInput) as error:
            memory.search("ns", "note", expand=bad)
        assert "expand" in error.value.message
    # with nothing in the graph, expansion appends nothing and changes no direct hit
    plain = memory.search("ns", "note", ranking="lexical")
    assert memory.search("ns", "note", ranking="lexical", expand=True).hits == plain.hits

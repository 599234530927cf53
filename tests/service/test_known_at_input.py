"""What known_at and changes refuse, naming the field (and changing nothing)."""

from __future__ import annotations

import pytest

import erstwhile


def test_refusals_name_the_field(memory: erstwhile.Memory) -> None:
    memory.upsert("ns", [{"id": "a", "content": "apple"}])
    cases = [
        (lambda: memory.search("ns", "apple", known_at="soon"), "known_at"),
        (lambda: memory.get("ns", "a", version=1, known_at="2024-01-01"), "known_at"),
        (lambda: memory.history("ns", "a", known_at="later"), "known_at"),
        (lambda: memory.changes("ns", "2024-01-02", "2024-01-01"), "since"),
        (lambda: memory.changes("ns", "2024-01-01", limit=0), "limit"),
        (lambda: memory.changes("ns", "whenever"), "since"),
    ]
    for call, field in cases:
        with pytest.raises(erstwhile.InvalidInput) as error:
            call()
        assert field in error.value.message, error.value.message
    with pytest.raises(erstwhile.NotFound):
        memory.get("ns", "a", known_at="2000-01-01")  # not recorded yet then
    assert memory.get("ns", "a").version == 1
    # expansion walks the graph as known then (tests/graph/test_graph_known_at_oracle.py)
    assert memory.search("ns", "apple", known_at="2000-01-01", expand=True).hits == []

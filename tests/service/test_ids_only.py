"""``ids_only`` (SPEC §6) on both backends: the same hits in the same order with the
same scores as the full search, each only its record's id (no content, metadata,
payload, vector, signals or via), in Python as on every wire."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.records import Record

WORDS = ("kettle", "lamp", "desk", "chair")


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    contents=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=8
    ),
    query=st.sampled_from(WORDS),
    ranking=st.sampled_from(["lexical", "semantic", "hybrid"]),
)
def test_ids_only_is_the_full_answer_reduced_to_ids(
    memory: erstwhile.Memory, contents: list[list[str]], query: str, ranking: str
) -> None:
    ns = f"ids-{uuid.uuid4().hex[:12]}"
    memory.upsert(ns, [
        {"id": f"r{i}", "content": " ".join(words), "metadata": {"n": str(i)},
         "payload": b"\x01", "vector": None}
        for i, words in enumerate(contents)
    ])  # fmt: skip
    options = {"ranking": ranking, "top_k": 20, "include_payload": True, "include_vector": True}
    full = memory.search(ns, query, **options)
    reduced = memory.search(ns, query, ids_only=True, **options)
    assert [(h.record.id, h.score) for h in reduced.hits] == [
        (h.record.id, h.score) for h in full.hits
    ]
    for hit in reduced.hits:
        assert hit.record == Record(id=hit.record.id)
        assert not hit.signals and not hit.via
    assert reduced.to_json()["hits"] == [
        {"record": {"id": h.record.id}, "score": h.score} for h in full.hits
    ]

"""The counts a record and a scope may hold, checked by length before anything grows
with them, and the bounded quoting every message that echoes input uses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import RecordInput, plain_record, validate_namespace
from erstwhile.domain.search import ExpireRequest, SearchRequest
from erstwhile.domain.validation import (
    MAX_FILTER,
    MAX_METADATA_KEYS,
    MAX_PREDICATES,
    MAX_QUERY_CHARS,
    MAX_TAGS,
    QUOTE_CHARS,
    field_path,
    parse_model,
    quoted,
)

PREDICATE = {"key": "n", "op": "GTE", "values": ["1"]}


@given(st.text(max_size=QUOTE_CHARS * 3))
def test_quoted_strings_are_a_bounded_prefix(text: str) -> None:
    shown = quoted(text)
    if len(text) <= QUOTE_CHARS:
        assert shown == repr(text)
    else:
        assert shown.startswith(repr(text[:QUOTE_CHARS]))
        assert f"({len(text):,} characters)" in shown
    assert len(shown) <= len(repr(text[:QUOTE_CHARS])) + 30


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=500),
        lambda inner: st.lists(inner, max_size=50) | st.dictionaries(st.text(), inner),
        max_leaves=200,
    )
)
def test_quoted_anything_is_bounded(value: Any) -> None:
    assert len(quoted(value)) <= 4 * QUOTE_CHARS + 30


def test_a_long_field_name_is_cut_in_the_path() -> None:
    path = field_path(("records", 0, "metadata", "k" * 20_000))
    assert path.startswith("records[0].metadata.kkk") and len(path) < 120


def test_a_long_namespace_is_quoted_not_echoed() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_namespace("n" * 20_000)
    assert len(caught.value.message) < 300
    assert "20,000 characters" in caught.value.message


@given(st.lists(st.sampled_from(["a", "b", "c", "d", " x", "é"]), max_size=MAX_TAGS))
def test_tags_keep_their_first_order_once_each(tags: list[str]) -> None:
    oracle: list[str] = []
    for tag in tags:  # the brute-force reading of "each once, in order"
        if tag not in oracle:
            oracle.append(tag)
    record = parse_model(RecordInput, {"content": "x", "tags": tags})
    assert record.tags == oracle
    plain = plain_record({"content": "x", "tags": tags})
    assert plain is not None and plain.tags == oracle


@pytest.mark.parametrize(
    ("field", "cap", "item"),
    [("tags", MAX_TAGS, lambda i: f"t{i}"), ("metadata", MAX_METADATA_KEYS, None)],
)
def test_a_record_holds_up_to_its_cap(field: str, cap: int, item: Any) -> None:
    def data(count: int) -> dict[str, Any]:
        if field == "metadata":
            return {"content": "x", "metadata": {f"k{i}": "v" for i in range(count)}}
        return {"content": "x", field: [item(i) for i in range(count)]}

    assert len(getattr(parse_model(RecordInput, data(cap)), field)) == cap
    assert plain_record(data(cap)) is not None
    assert plain_record(data(cap + 1)) is None  # the validator names the problem
    with pytest.raises(InvalidInput) as caught:
        parse_model(RecordInput, data(cap + 1), "records[0]")
    assert caught.value.message.startswith(f"records[0].{field}: holds {cap + 1:,} ")
    assert f"at most {cap:,}" in caught.value.message


def test_the_count_is_checked_before_any_item() -> None:
    """100,000 items that are each wrong: one message about the count, not 100,000
    item errors (pydantic would read every item first)."""
    with pytest.raises(InvalidInput) as caught:
        parse_model(RecordInput, {"content": "x", "tags": [1] * 100_000}, "records[0]")
    assert caught.value.message == (
        "records[0].tags: holds 100,000 tags; a record takes at most 256: "
        "keep the ones you search by"
    )


@pytest.mark.parametrize("model", [SearchRequest, ExpireRequest])
@pytest.mark.parametrize(
    ("field", "cap", "make"),
    [
        ("tags", MAX_TAGS, lambda n: [f"t{i}" for i in range(n)]),
        ("filter", MAX_FILTER, lambda n: {f"k{i}": "v" for i in range(n)}),
        ("predicates", MAX_PREDICATES, lambda n: [PREDICATE] * n),
    ],
)
def test_a_scope_holds_up_to_its_cap(model: Any, field: str, cap: int, make: Any) -> None:
    base: dict[str, Any] = (
        {"query": "x"} if model is SearchRequest else {"action": "invalidate", "max_rows": 1}
    )
    assert len(getattr(parse_model(model, {**base, field: make(cap)}), field)) == cap
    with pytest.raises(InvalidInput) as caught:
        parse_model(model, {**base, field: make(cap + 1)})
    assert caught.value.message.startswith(f"{field}: holds {cap + 1:,} ")


def test_a_query_text_holds_up_to_its_cap() -> None:
    """A query of 300,000 distinct words once reached the database as more variables
    than one statement binds (``storage.unavailable``): it is refused as input, first."""
    words = " ".join(f"w{i}" for i in range(300_000))
    at_cap = words[:MAX_QUERY_CHARS]
    assert parse_model(SearchRequest, {"query": at_cap}).query == at_cap
    with pytest.raises(InvalidInput) as caught:
        parse_model(SearchRequest, {"query": words})
    assert caught.value.message.startswith(f"query: holds {len(words):,} characters; ")

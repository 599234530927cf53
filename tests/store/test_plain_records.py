"""A mapping of the plain shape becomes, through ``plain_record``, the very record the
validator makes of it (every field, and the same fields set); anything else is left
to the validator (``None``), which names what is wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import RecordInput, plain_record, updated
from erstwhile.domain.validation import parse_model
from erstwhile.store.sql import rows

# a few awkward characters of each kind: spaces, unprintables, capitals, accents
_TEXT = st.text(alphabet=" \t\n\x00aZé_-.:1", max_size=6)
_INSTANT = st.sampled_from(
    ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123456Z", "2023-01-01T00:00:00Z",
     "2024-02-30T00:00:00Z", "2024-05-01T12:00:00+02:00", "2024-05-01", "2024-05-01T12:00:00z",
     " 2024-05-01T12:00:00Z", "2024-05-01T12:00:00.1234567Z", "0000-01-01T00:00:00Z", "x"]
)  # fmt: skip
_VALUE: Any = st.one_of(_TEXT, st.integers(-3, 3), st.booleans(), st.none(), st.floats())
_FIELDS: dict[str, Any] = {
    "id": st.one_of(_TEXT, st.just("x" * 257), st.just("x" * 256), st.integers(0, 2)),
    "content": st.one_of(_TEXT, st.none(), st.integers(0, 2)),
    "metadata": st.one_of(st.dictionaries(_TEXT, st.one_of(_TEXT, _VALUE), max_size=3),
                          st.none(), st.just([])),
    "tags": st.one_of(st.lists(_TEXT, max_size=4), st.lists(_VALUE, max_size=2), st.none(),
                      st.just(("a",))),
    "kind": st.one_of(_TEXT, st.none(), st.just(" Fact ")),
    "key": st.one_of(_TEXT, st.none(), st.integers(0, 2)),
    "source": st.one_of(_TEXT, st.none(), st.integers(0, 2)),
    "valid_from": st.one_of(_INSTANT, st.none(), st.integers(0, 2)),
    "valid_to": st.one_of(_INSTANT, st.none()),
    "supersedes": st.one_of(st.lists(_TEXT, max_size=3), st.none(), st.just(["a", "a"])),
    "if_version": st.one_of(st.integers(-2, 2), st.just(2**63), st.booleans(), st.none(),
                            st.just(1.0)),
    "origin": st.none(),
    "trust": st.just("verified"),
    "payload": st.just(b"x"),
    "unknown": st.just(1),
}  # fmt: skip
_NEARLY_PLAIN: dict[str, Any] = {
    "id": _TEXT, "content": _TEXT, "metadata": st.dictionaries(_TEXT, _TEXT, max_size=3),
    "tags": st.lists(_TEXT, max_size=4), "kind": _TEXT, "key": st.none() | _TEXT,
    "source": st.none() | _TEXT, "valid_from": st.none() | _INSTANT,
    "valid_to": st.none() | _INSTANT, "supersedes": st.lists(_TEXT, max_size=3),
    "if_version": st.none() | st.integers(0, 3),
}  # fmt: skip
# any shape at all, and shapes that are mostly plain (so the fast path is often taken)
_SHAPES = st.fixed_dictionaries({}, optional=_FIELDS) | st.fixed_dictionaries(
    {}, optional=_NEARLY_PLAIN
)


def _validated(data: dict[str, Any]) -> RecordInput | InvalidInput:
    try:
        return parse_model(RecordInput, dict(data), "records[0]")
    except InvalidInput as error:
        return error


@settings(max_examples=600, deadline=None)
@given(_SHAPES)
def test_a_plain_record_is_the_validated_one(data: dict[str, Any]) -> None:
    built = plain_record(data)
    expected = _validated(data)
    if built is None:
        return  # left to the validator, which decides (the write's own path)
    assert isinstance(expected, RecordInput), f"{data!r} was built, but {expected}"
    assert type(built) is type(expected)
    assert built.__dict__ == expected.__dict__
    assert list(built.__dict__) == list(expected.__dict__)
    assert built.model_fields_set == expected.model_fields_set
    assert built.model_dump() == expected.model_dump()
    assert built.to_json() == expected.to_json()


def test_the_common_shapes_are_plain() -> None:
    """What the bench and most callers send is taken by the fast path (else it is slow)."""
    for data in (
        {"content": "x"},
        {"id": "a", "content": "x", "metadata": {"room": "r"}, "tags": ["t", "t"],
         "valid_from": "2024-05-01T12:00:00.123456Z", "valid_to": "2024-06-01T00:00:00Z",
         "supersedes": ["b"], "kind": " Fact", "key": "k", "source": "s", "if_version": 0},
    ):  # fmt: skip
        built = plain_record(data)
        assert built is not None
        assert built.__dict__ == parse_model(RecordInput, dict(data)).__dict__
    vector = [1.0, 2.0]
    with_vector = plain_record({"content": "x", "vector": vector}, vector)
    assert with_vector is not None and with_vector.vector is vector
    assert plain_record({"content": "x", "vector": vector}) is None  # not checked: not plain


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"content": "x", "valid_from": "2024-02-30T00:00:00Z"}, "records[3].valid_from"),
        ({"content": "x", "tags": [" "]}, "records[3].tags"),
        ({"content": "x", "metadata": {"a": [1]}}, "records[3].metadata.a"),
        ({"content": "x", "valid_from": "2024-05-02T00:00:00Z",
          "valid_to": "2024-05-01T00:00:00Z"}, "records[3]"),
        ({"content": 5}, "records[3].content"),
        ({"content": "x", "vector": [1.0, "a"]}, "records[3].vector"),
    ],
)  # fmt: skip
def test_a_batch_with_vectors_names_the_bad_field(
    tmp_path: Any, record: dict[str, Any], field: str
) -> None:
    """The vector batch path (plain records, vectors checked together) refuses a bad
    record with the field named and writes nothing of the batch."""
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as memory:
        dims = 256
        good = [{"id": f"r{i}", "content": "x", "vector": [1.0] * dims} for i in range(3)]
        bad = {**record}
        if "vector" in bad:
            bad["vector"] = [1.0] * (dims - 1) + ["a"]
        else:
            bad["vector"] = [1.0] * dims
        with pytest.raises(InvalidInput) as error:
            memory.upsert("ns", [*good, bad])
        assert field in error.value.message
        assert memory.search("ns", "x", top_k=5).hits == []


@settings(max_examples=200, deadline=None)
@given(
    _SHAPES,
    st.fixed_dictionaries(
        {}, optional={"version": st.integers(1, 5), "namespace": _TEXT, "tags": st.just([])}
    ),
)
def test_updated_is_model_copy(data: dict[str, Any], update: dict[str, Any]) -> None:
    record = _validated(data)
    if isinstance(record, InvalidInput):
        return
    copy, expected = updated(record, update), record.model_copy(update=update)
    assert type(copy) is type(expected)
    assert copy.__dict__ == expected.__dict__
    assert copy.model_fields_set == expected.model_fields_set
    assert copy.__pydantic_extra__ == expected.__pydantic_extra__
    assert copy.__pydantic_private__ == expected.__pydantic_private__
    assert copy.__dict__ is not record.__dict__
    assert copy.model_fields_set is not record.model_fields_set


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES)
def test_the_row_encoders_write_what_json_writes(value: Any) -> None:
    assert rows._SORTED_JSON(value) == json.dumps(value, sort_keys=True, ensure_ascii=False)
    assert rows._JSON(value) == json.dumps(value, ensure_ascii=False)

"""A ``records`` row becomes the Record it was written from: ``record_from_row`` builds
what ``Record.model_construct`` builds, field by field, and every field written comes
back through a search and a get on both backends."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.records import Origin, Record
from erstwhile.domain.time import from_us
from erstwhile.store.sql.rows import record_from_row

_TEXT = st.text(max_size=12)
_US = st.integers(-(2**40), 2**52)
_MAYBE_US = st.none() | _US


def _reference(row: tuple[Any, ...], with_payload: bool) -> Record:
    """The construction ``record_from_row`` replaces, as it was written."""
    origin = json.loads(row[12]) if row[12] else None

    def instant(us: int | None) -> Any:
        return None if us is None else from_us(us)

    return Record.model_construct(
        id=row[2], namespace=row[1], content=row[3],
        payload=row[5] if with_payload else None, metadata=json.loads(row[6]),
        tags=json.loads(row[7]), kind=row[8], key=row[9], trust=row[10], source=row[11],
        origin=Origin.model_construct(**origin) if origin else None,
        created_at=instant(row[13]), updated_at=instant(row[14]), valid_from=instant(row[15]),
        valid_to=instant(row[16]), deleted_at=instant(row[17]),
        supersedes=json.loads(row[18]), superseded_by=row[19], version=row[20],
        if_version=None, vector=None,
    )  # fmt: skip


_ORIGIN = st.none() | st.builds(
    lambda s, d, c, r: json.dumps({"source": s, "document": d, "chunk": c, "revision": r}),
    _TEXT, _TEXT, st.integers(0, 99), st.none() | _TEXT,
)  # fmt: skip
_ROWS = st.tuples(
    st.integers(1, 2**40), _TEXT, _TEXT, _TEXT, _TEXT, st.none() | st.binary(max_size=8),
    st.dictionaries(_TEXT, _TEXT, max_size=3).map(json.dumps),
    st.lists(_TEXT, max_size=3).map(json.dumps), _TEXT, st.none() | _TEXT,
    st.sampled_from(["unverified", "verified", "disputed"]), st.none() | _TEXT, _ORIGIN,
    _US, _US, _US, _MAYBE_US, _MAYBE_US, st.lists(_TEXT, max_size=2).map(json.dumps),
    st.none() | _TEXT, st.integers(1, 2**62),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_ROWS, st.booleans())
def test_a_row_builds_the_record_model_construct_builds(
    row: tuple[Any, ...], with_payload: bool
) -> None:
    built = record_from_row(row, with_payload=with_payload)
    expected = _reference(row, with_payload)
    assert built.__dict__ == expected.__dict__
    assert built.model_fields_set == expected.model_fields_set
    assert built == expected
    assert built.model_dump() == expected.model_dump()
    assert built.to_json() == expected.to_json()
    # parsed texts are shared between rows: one record's lists are its own
    other = record_from_row(row, with_payload=with_payload)
    built.metadata["changed"] = "x"
    built.tags.append("changed")
    built.supersedes.append("changed")
    assert other.__dict__ == expected.__dict__


def test_every_field_written_comes_back_from_search_and_get(memory: erstwhile.Memory) -> None:
    written = [
        {
            "id": "full",
            "content": "alpha beta gamma",
            "payload": b"\x00\x01raw",
            "metadata": {"room": "kitchen", "count": "3"},
            "tags": ["one", "two"],
            "kind": "fact",
            "key": "the-key",
            "source": "chat",
            "origin": {"source": "file", "document": "doc", "chunk": 2, "revision": "r1"},
            "valid_from": "2024-01-01T00:00:00Z",
            "valid_to": "2030-01-01T00:00:00.000001Z",
        },
        {"id": "bare", "content": "alpha delta"},
    ]
    memory.upsert("rows", written)
    memory.upsert("rows", {"id": "next", "content": "alpha next", "supersedes": ["bare"]})
    memory.delete("rows", "next")
    for query, options in (
        ("alpha", {"ranking": "lexical"}),
        ("alpha", {"ranking": "semantic"}),
        ("alpha", {"ranking": "hybrid"}),
    ):
        found = memory.search("rows", query, include_historical=True, include_payload=True,
                              **options)  # fmt: skip
        by_id = {hit.record.id: hit.record for hit in found.hits}
        assert set(by_id) == {"full", "bare", "next"}, options  # historical: the deleted too
        for record_id, record in by_id.items():
            assert record.to_json() == memory.get("rows", record_id).to_json()
    full = memory.get("rows", "full")
    assert (full.content, full.payload, full.kind, full.key, full.source) == (
        "alpha beta gamma", b"\x00\x01raw", "fact", "the-key", "chat")  # fmt: skip
    assert full.metadata == {"room": "kitchen", "count": "3"}
    assert full.tags == ["one", "two"]
    assert full.origin == Origin(source="file", document="doc", chunk=2, revision="r1")
    assert full.valid_from == from_us(1_704_067_200_000_000)
    assert full.valid_to == from_us(1_893_456_000_000_001)
    assert full.created_at is not None and full.updated_at is not None
    assert full.version == 1 and full.deleted_at is None and full.supersedes == []
    bare = memory.get("rows", "bare")
    assert bare.superseded_by == "next" and bare.valid_to is not None
    assert bare.metadata == {} and bare.tags == [] and bare.origin is None
    assert bare.key is None and bare.source is None
    gone = memory.get("rows", "next")
    assert gone.deleted_at is not None and gone.supersedes == ["bare"]

"""Converting between ``records`` rows and :class:`Record` — the one place that does,
for both dialects (their ``records`` tables have these columns, in any order)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from functools import cache, lru_cache
from hashlib import sha256
from typing import Any

from erstwhile.domain.records import Origin, Record
from erstwhile.domain.search import SearchRequest, parse_number
from erstwhile.domain.time import from_us, to_us

#: The columns a record's row is written with (every one but the rowid).
ROW_FIELDS = (
    "namespace", "id", "content", "content_hash", "payload", "metadata", "tags", "kind", "key",
    "trust", "source", "origin", "created_at", "updated_at", "valid_from", "valid_to",
    "deleted_at", "supersedes", "superseded_by", "version",
)  # fmt: skip

COLUMNS = (
    "rowid, namespace, id, content, content_hash, payload, metadata, tags, kind, key, trust,"
    " source, origin, created_at, updated_at, valid_from, valid_to, deleted_at, supersedes,"
    " superseded_by, version"
)


@cache  # every search asks for the same few: build each once
def prefixed(alias: str, rowid: str = "rowid") -> str:
    """``COLUMNS`` of ``alias``; the record's rowid read from column ``rowid`` (a
    replaced version's ``record``)."""
    names = [name.strip() for name in COLUMNS.split(",")]
    first = f"{alias}.{rowid}" if rowid == "rowid" else f"{alias}.{rowid} AS rowid"
    return ", ".join([first, *(f"{alias}.{name}" for name in names[1:])])


#: A record's metadata and tags as stored (JSON text) -> their values. Searches read the
#: same few texts again and again (a room, a handful of tags); each is parsed once and
#: copied per record (a shallow copy is enough: metadata values and tags are strings).
_metadata = lru_cache(maxsize=4096)(json.loads)
_EMPTY_LIST = "[]"
_new_record = object.__new__
_set = object.__setattr__
_EPOCH = from_us(0)
_US = timedelta(microseconds=1)
#: The fields ``record_from_row`` sets, as :meth:`Record.model_construct` given them
#: would mark them set (``known_until`` stays unset).
_FIELDS_SET = frozenset(
    {
        "id", "namespace", "content", "payload", "metadata", "tags", "kind", "key", "trust",
        "source", "origin", "created_at", "updated_at", "valid_from", "valid_to",
        "deleted_at", "supersedes", "superseded_by", "version", "if_version", "vector",
    }
)  # fmt: skip


def record_from_row(row: Sequence[Any], *, with_payload: bool = True) -> Record:
    """Builds a Record from a row selected with ``COLUMNS`` (already valid: no re-check).

    What :meth:`Record.model_construct` builds, without its per-field walk: every search
    hit is one, and this ran at 10 us a row (tests/store/test_record_rows.py holds the
    two equal field by field)."""
    origin = json.loads(row[12]) if row[12] else None
    valid_to, deleted_at = row[16], row[17]
    tags, supersedes = row[7], row[18]
    record = _new_record(Record)
    _set(record, "__dict__", {
        "id": row[2],
        "namespace": row[1],
        "content": row[3],
        "payload": row[5] if with_payload else None,
        "metadata": dict(_metadata(row[6])),
        "tags": [] if tags == _EMPTY_LIST else list(_metadata(tags)),
        "kind": row[8],
        "key": row[9],
        "trust": row[10],
        "source": row[11],
        "origin": Origin.model_construct(**origin) if origin else None,
        "created_at": None if row[13] is None else _EPOCH + row[13] * _US,
        "updated_at": None if row[14] is None else _EPOCH + row[14] * _US,
        "valid_from": None if row[15] is None else _EPOCH + row[15] * _US,
        "valid_to": None if valid_to is None else _EPOCH + valid_to * _US,
        "deleted_at": None if deleted_at is None else _EPOCH + deleted_at * _US,
        "supersedes": [] if supersedes == _EMPTY_LIST else json.loads(supersedes),
        "superseded_by": row[19],
        "version": row[20],
        "if_version": None,
        "vector": None,
        "known_until": None,
    })  # fmt: skip
    _set(record, "__pydantic_fields_set__", set(_FIELDS_SET))
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


#: ``json.dumps`` with these options, without building an encoder per call (every
#: write makes a few).
def _encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=False).encode`` (the same
    text), its C encoder made once instead of once per call (without the check for
    circular values, which a record's JSON values cannot hold)."""
    encoder = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the encoder as it is
        return encoder.encode
    chunks = make(
        None, encoder.default, json.encoder.encode_basestring, None,
        encoder.key_separator, encoder.item_separator, sort_keys, False, True,
    )  # fmt: skip

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_SORTED_JSON = _encoder(sort_keys=True)
_JSON = _encoder(sort_keys=False)


def record_from_snapshot(body: str, payload: bytes | None) -> Record:
    """A version as the versions table of stores before m014 held it (its JSON, the
    payload beside it): what their migrations read."""
    data = json.loads(body)
    data["payload"] = None
    record = Record.model_validate(data)
    record.payload = payload
    return record


def row_values(record: Record) -> dict[str, Any]:
    """The column values that represent ``record`` (all instants set by the caller)."""
    fields = record.__dict__  # read once each, past the model's attribute lookup
    created, updated, valid_from = fields["created_at"], fields["updated_at"], fields["valid_from"]
    assert created and updated and valid_from and fields["version"]
    created_us = to_us(created)
    valid_to, deleted_at = fields["valid_to"], fields["deleted_at"]
    metadata, tags, supersedes = fields["metadata"], fields["tags"], fields["supersedes"]
    origin = fields["origin"]
    return {
        "namespace": fields["namespace"],
        "id": fields["id"],
        "content": fields["content"],
        "content_hash": record.content_hash(),
        "payload": fields["payload"],
        "metadata": _SORTED_JSON(metadata) if metadata else "{}",
        "tags": _JSON(tags) if tags else "[]",
        "kind": fields["kind"],
        "key": fields["key"],
        "trust": fields["trust"],
        "source": fields["source"],
        "origin": origin.model_dump_json() if origin else None,
        "created_at": created_us,
        # a write's record and update times are one instant, its "now"
        "updated_at": created_us if updated is created else to_us(updated),
        "valid_from": to_us(valid_from),
        "valid_to": to_us(valid_to) if valid_to else None,
        "deleted_at": to_us(deleted_at) if deleted_at else None,
        "supersedes": _JSON(supersedes) if supersedes else "[]",
        "superseded_by": fields["superseded_by"],
        "version": fields["version"],
    }


#: A metadata value's number (:func:`parse_number`), each made once: a namespace's
#: records share a few values (a room, a team) again and again.
_number = lru_cache(maxsize=4096)(parse_number)


def created_row(record: Record, namespace: str, now: int) -> dict[str, Any] | None:
    """What :func:`row_values` makes of the record that an
    upsert of ``record`` at ``now`` creates when nothing is stored under its id
    (``rules.revision`` of it: in ``namespace``, unverified, version 1, created and
    updated at ``now``, valid from its ``valid_from`` or ``now``), made from
    ``record`` itself: no revised copy, no instant made twice. For a record without
    a key and without ``supersedes`` (the caller's test). None when the revision
    would refuse it (``if_version``, a validity ending before it starts) or an
    instant is a naive datetime (which it would not compare): the caller then takes
    the general path, which says what is wrong (tests/store/test_plain_batch.py
    holds the two paths' rows equal)."""
    fields = record.__dict__
    if_version, start, end = fields["if_version"], fields["valid_from"], fields["valid_to"]
    deleted = fields["deleted_at"]
    if (
        (if_version is not None and if_version != 0)
        or (start is not None and start.tzinfo is None)
        or (end is not None and end.tzinfo is None)
        or (deleted is not None and deleted.tzinfo is None)
    ):
        return None
    valid_from = now if start is None else to_us(start)
    valid_to = None if end is None else to_us(end)
    if valid_to is not None and valid_to <= valid_from:
        return None
    content, metadata, tags = fields["content"], fields["metadata"], fields["tags"]
    origin = fields["origin"]
    return {
        "namespace": namespace,
        "id": fields["id"],
        "content": content,
        "content_hash": sha256(content.encode("utf-8")).hexdigest(),
        "payload": fields["payload"],
        "metadata": _SORTED_JSON(metadata) if metadata else "{}",
        "tags": _JSON(tags) if tags else "[]",
        "kind": fields["kind"],
        "key": None,
        "trust": "unverified",
        "source": fields["source"],
        "origin": origin.model_dump_json() if origin else None,
        "created_at": now,
        "updated_at": now,
        "valid_from": valid_from,
        "valid_to": valid_to,
        "deleted_at": None if deleted is None else to_us(deleted),
        "supersedes": "[]",
        "superseded_by": None,
        "version": 1,
    }


#: The fields a record's tag and metadata rows hold besides its validity.
SCOPE_FIELDS = frozenset({"tags", "metadata"})


def scope_kept(columns: Iterable[str] | None) -> bool:
    """Whether a change of ``columns`` alone (None: of any) leaves a record's tag and
    metadata rows as they are but for their validity (:func:`scope_rows`)."""
    return columns is not None and SCOPE_FIELDS.isdisjoint(columns)


def scope_rows(
    record: Record, values: dict[str, Any], rowid: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The tag rows (namespace, tag, record, valid_from, valid_to, deleted_at) and the
    metadata rows (namespace, key, value, record, num, valid_from, valid_to, deleted_at)
    of ``record`` (its ``row_values``, or :func:`created_row`'s) as row ``rowid``: they
    repeat its namespace and validity."""
    namespace = values["namespace"]
    validity = (values["valid_from"], values["valid_to"], values["deleted_at"])
    fields = record.__dict__
    tags = [(namespace, tag, rowid, *validity) for tag in fields["tags"]]
    meta = [
        (namespace, key, value, rowid, _number(value), *validity)
        for key, value in fields["metadata"].items()
    ]
    return tags, meta


def hits(
    rows: Iterable[Sequence[Any]],
    request: SearchRequest,
    score: Callable[[Sequence[Any]], float],
) -> list[tuple[Record, float]]:
    """(record, score) per row selected with ``COLUMNS`` first, the payload kept only
    if the search asks for it."""
    return [
        (record_from_row(row, with_payload=request.include_payload), score(row)) for row in rows
    ]


def best(found: list[tuple[Record, float]], limit: int) -> list[tuple[Record, float]]:
    """The ``limit`` highest scores, ties by id."""
    found.sort(key=lambda hit: (-hit[1], hit[0].id))
    return found[:limit]

"""Write rules every backend applies the same way: pure functions over records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from erstwhile.domain.errors import InvalidInput, VersionConflict, WriteConflict
from erstwhile.domain.records import Record, updated
from erstwhile.domain.time import format_instant, from_us, to_us
from erstwhile.domain.validation import quoted

#: The fields a supersession changes of the record it closes (besides
#: :data:`VERSIONING`'s).
CLOSING = ("valid_to", "superseded_by")
#: The fields every next version (:func:`next_version`) changes besides its update's.
VERSIONING = ("updated_at", "version")


def supersession_closure(old: Record, new: Record, field: str, now: int) -> Record | None:
    """The new version of ``old`` once ``new`` supersedes it: validity closed at
    ``new.valid_from`` and ``superseded_by`` set. ``None`` when ``new`` already closed
    it (a re-upsert, not a fork). Refuses forks, deleted records and a replacement
    that does not start later."""
    assert new.valid_from is not None and old.valid_from is not None
    if old.superseded_by == new.id:
        return None
    if old.superseded_by is not None:
        raise WriteConflict(
            f"{field}: {old.id!r} was already superseded by {old.superseded_by!r}; "
            "supersede the newest record of the chain instead (chains never fork)"
        )
    if old.deleted_at is not None:
        raise WriteConflict(f"{field}: {old.id!r} is deleted; it cannot be superseded")
    if new.valid_from <= old.valid_from:
        raise InvalidInput(
            f"valid_from of {new.id!r} ({format_instant(to_us(new.valid_from))}) must be later "
            f"than valid_from of the record it supersedes, {old.id!r} "
            f"({format_instant(to_us(old.valid_from))})"
        )
    closed_at = new.valid_from
    if old.valid_to is not None and old.valid_to < closed_at:
        closed_at = old.valid_to  # an earlier invalidation stands; never reopen it
    return next_version(old, dict(zip(CLOSING, (closed_at, new.id), strict=True)), now)


def next_version(record: Record, update: dict[str, Any], now: int) -> Record:
    """``record`` with ``update`` applied, as its next version written at ``now``
    (its fields but ``update``'s and :data:`VERSIONING`'s as they were)."""
    return updated(
        record, {**update, "updated_at": from_us(now), "version": (record.version or 0) + 1}
    )


def revision(
    incoming: Record,
    existing: Record | None,
    field: str,
    *,
    namespace: str,
    now: int,
    has_predecessor: Callable[[], bool],
) -> Record:
    """The record an upsert of ``incoming`` writes, given what the store holds under its
    id (``existing``). Checks ``if_version``; keeps the stored validity unless a new
    one is given (and always keeps a supersession's closure, which is the store's);
    refuses to move ``valid_from`` of a record that supersedes another
    (``has_predecessor`` is asked only then); resets trust; bumps the version."""
    current_version = existing.version or 0 if existing else 0
    if incoming.if_version is not None and incoming.if_version != current_version:
        state = f"is at version {current_version}" if existing else "does not exist"
        raise VersionConflict(
            f"{field}.if_version is {incoming.if_version} but {incoming.id!r} {state}; "
            "re-read it and retry"
        )
    now_dt = from_us(now)
    valid_from = incoming.valid_from or (existing.valid_from if existing else None) or now_dt
    valid_to = incoming.valid_to
    if existing is not None:
        if existing.superseded_by is not None or "valid_to" not in incoming.model_fields_set:
            valid_to = existing.valid_to
        if valid_from != existing.valid_from and has_predecessor():
            raise InvalidInput(
                f"{field}.valid_from cannot move: {incoming.id!r} supersedes another record and "
                "their validities meet at this instant; supersede it with a new record instead"
            )
    if valid_to is not None and valid_to <= valid_from:
        raise InvalidInput(f"{field}.valid_to must be later than valid_from")
    return updated(
        incoming,
        {
            "namespace": namespace,
            "trust": "unverified",
            "created_at": existing.created_at if existing else now_dt,
            "updated_at": now_dt,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "supersedes": [old for old in incoming.supersedes if old != incoming.id],
            "superseded_by": existing.superseded_by if existing else None,
            "version": current_version + 1,
            "if_version": None,
            "vector": None,
            "known_until": None,
        },
    )


def claims_key(record: Record, now: int) -> bool:
    """Whether ``record`` holds its key at ``now``: it has one and is live and not ended."""
    return (
        record.key is not None
        and record.deleted_at is None
        and record.superseded_by is None
        and (record.valid_to is None or to_us(record.valid_to) > now)
    )


def key_conflict(field: str, record: Record, holder: str) -> WriteConflict:
    return WriteConflict(
        f"{field}.key {quoted(record.key)} is held by the current record {holder!r}; "
        "supersede that record or choose another key"
    )


def write_op(existing: Record | None, record: Record) -> str:
    """The ledger's name for an upsert: create, update, or resurrect (of a tombstone)."""
    if existing is None:
        return "create"
    if existing.deleted_at is not None and record.deleted_at is None:
        return "resurrect"
    return "update"


def invalidation(record: Record, at: int) -> dict[str, Any] | None:
    """The change that ends ``record``'s validity at ``at``; ``None`` when it is already
    over by then (validity is never extended)."""
    if record.superseded_by is not None:
        raise WriteConflict(
            f"{record.id!r} was superseded by {record.superseded_by!r}; its validity is closed"
        )
    assert record.valid_from is not None
    if record.valid_to is not None and to_us(record.valid_to) <= at:
        return None
    if at <= to_us(record.valid_from):
        raise InvalidInput(
            f"at ({format_instant(at)}) must be later than the record's valid_from "
            f"({format_instant(to_us(record.valid_from))})"
        )
    return {"valid_to": from_us(at)}

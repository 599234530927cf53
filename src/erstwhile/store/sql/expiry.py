"""Expire: which records an action takes, and applying it to each of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from erstwhile.domain.search import ExpireAction, ExpireRequest
from erstwhile.store.sql.writes import Writes


def candidates(request: ExpireRequest, now: int) -> tuple[list[str], list[Any]]:
    """The terms, over ``records r``, of the records the request still changes at
    ``now``: its kind and key, and for the action: invalidate takes the live records
    valid at ``now``, soft delete the ones not yet tombstoned, hard delete every one.
    Tags and metadata are the scope's (:func:`~erstwhile.store.sql.scope.metadata_clause`)."""
    terms = [f"r.{column} {op} ?" for column, op, _ in request.record_terms()]
    params: list[Any] = [value for _, _, value in request.record_terms()]
    if request.action == ExpireAction.INVALIDATE:
        terms.append(
            "r.deleted_at IS NULL AND r.superseded_by IS NULL"
            " AND r.valid_from < ? AND (r.valid_to IS NULL OR r.valid_to > ?)"
        )
        params += [now, now]
    elif request.action == ExpireAction.SOFT_DELETE:
        terms.append("r.deleted_at IS NULL")
    return terms, params


def apply(writes: Writes, record_ids: Sequence[str], action: ExpireAction) -> int:
    """Runs ``action`` on each record, in order; returns how many."""
    for record_id in record_ids:
        if action == ExpireAction.INVALIDATE:
            writes.invalidate(record_id, writes.now)
        elif action == ExpireAction.SOFT_DELETE:
            writes.soft_delete(record_id)
        else:
            writes.hard_delete(record_id)
    return len(record_ids)

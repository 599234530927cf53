"""Expire, as both SQL backends run it: which records an action takes, and applying
it to each through the backend's own writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memstrata.domain.search import ExpireAction, ExpireRequest


class Writes(Protocol):
    """The per-record writes of a backend (its ``writes`` module)."""

    def invalidate(
        self, conn: Any, namespace: str, record_id: str, at: int, *, now: int, actor: str
    ) -> int: ...
    def soft_delete(
        self, conn: Any, namespace: str, record_id: str, *, now: int, actor: str
    ) -> int: ...
    def hard_delete(
        self, conn: Any, namespace: str, record_id: str, *, now: int, actor: str
    ) -> None: ...


def candidates(request: ExpireRequest, now: int, mark: str) -> tuple[list[str], list[Any]]:
    """The terms, over ``records r``, of the records the request still changes at
    ``now`` (``mark`` is the backend's placeholder): its kind and key, and for the
    action: invalidate takes the live records valid at ``now``, soft delete the ones
    not yet tombstoned, hard delete every one. Tags and metadata are the backend's."""
    terms = [f"r.{column} {op} {mark}" for column, op, _ in request.record_terms()]
    params: list[Any] = [value for _, _, value in request.record_terms()]
    if request.action == ExpireAction.INVALIDATE:
        terms.append(
            "r.deleted_at IS NULL AND r.superseded_by IS NULL"
            f" AND r.valid_from < {mark} AND (r.valid_to IS NULL OR r.valid_to > {mark})"
        )
        params += [now, now]
    elif request.action == ExpireAction.SOFT_DELETE:
        terms.append("r.deleted_at IS NULL")
    return terms, params


def apply(
    writes: Writes,
    conn: Any,
    namespace: str,
    record_ids: Sequence[str],
    action: ExpireAction,
    *,
    now: int,
    actor: str,
) -> int:
    """Runs ``action`` on each record, in order; returns how many."""
    for record_id in record_ids:
        if action == ExpireAction.INVALIDATE:
            writes.invalidate(conn, namespace, record_id, now, now=now, actor=actor)
        elif action == ExpireAction.SOFT_DELETE:
            writes.soft_delete(conn, namespace, record_id, now=now, actor=actor)
        else:
            writes.hard_delete(conn, namespace, record_id, now=now, actor=actor)
    return len(record_ids)

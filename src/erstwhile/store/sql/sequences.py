"""The record before another in its sequence (:mod:`erstwhile.domain.sequences`), for
both dialects: what a record naming a conversation or session is embedded with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from erstwhile.domain.sequences import SEQUENCE_KEYS, Place, place_of
from erstwhile.domain.vectors import MAX_INT64
from erstwhile.store.sql.dialect import Dialect, Tx
from erstwhile.store.sql.scope import conjunction, metadata_clause


def places(d: Dialect, tx: Tx, namespace: str, rowids: Sequence[int]) -> dict[int, Place]:
    """The places of the records ``rowids`` that name a sequence, by rowid."""
    if not rowids:
        return {}
    test, params = d.in_list("rowid", list(rowids))
    keys = ", ".join(d.json_text("metadata", key) for key in SEQUENCE_KEYS)
    rows = tx.execute(
        f"SELECT rowid, id, valid_from, {keys} FROM records WHERE namespace = ? AND {test}",
        [namespace, *params],
    ).fetchall()
    found = {}
    for rowid, record_id, valid_from, *values in rows:
        metadata = {k: v for k, v in zip(SEQUENCE_KEYS, values, strict=True) if v is not None}
        place = place_of(record_id, metadata, int(valid_from))
        if place is not None:
            found[int(rowid)] = place
    return found


def before(d: Dialect, tx: Tx, namespace: str, place: Place) -> tuple[int, str] | None:
    """``(valid_from, content)`` of the record before ``place`` in its sequence: the
    last live one (not deleted, not superseded, valid at ``place.valid_from``) by
    ``valid_from``, then by first write (rowid); a record already stored keeps its own
    rowid as its place, a new one comes after every stored record."""
    given = {k: v for k, v in zip(SEQUENCE_KEYS, (place.conversation, place.session), strict=True)}
    filters = {k: v for k, v in given.items() if v is not None}
    clauses, params = metadata_clause(d, "p", namespace, filters, [], [])
    clauses += [f"{d.json_text('p.metadata', k)} IS NULL" for k, v in given.items() if v is None]
    at = place.valid_from
    others, other_params = d.in_list("p.id", [place.record_id, *place.replaces])
    where = conjunction(
        [
            "p.namespace = ?",
            *clauses,
            f"NOT ({others})",
            "p.deleted_at IS NULL",
            "p.superseded_by IS NULL",
            "(p.valid_to IS NULL OR p.valid_to > ?)",
            "(p.valid_from < ? OR (p.valid_from = ? AND p.rowid < COALESCE("
            "(SELECT s.rowid FROM records s WHERE s.namespace = ? AND s.id = ?), ?)))",
        ]
    )
    values: list[Any] = [namespace, *params, *other_params, at, at, at]
    values += [namespace, place.record_id, MAX_INT64]
    row = tx.execute(
        f"SELECT p.valid_from, p.content FROM records p WHERE {where}"
        " ORDER BY p.valid_from DESC, p.rowid DESC LIMIT 1",
        values,
    ).fetchone()
    return (int(row[0]), str(row[1])) if row else None

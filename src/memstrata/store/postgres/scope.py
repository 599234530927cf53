"""The WHERE clause every retrieval leg shares on PostgreSQL: scope, trust and time.

The PostgreSQL rendering of SPEC §3's overlap rule lives here and nowhere else in
this backend (SQLite's is ``store/sqlite/scope.py``; both are read from
:class:`~memstrata.domain.time.Window`). Tags and metadata are matched through their
own tables, by ``md5`` first so an index holds any length, then by the exact text.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memstrata.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from memstrata.domain.time import Window

_NUMERIC_SQL = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def temporal_clause(alias: str, window: Window | None) -> tuple[str, list[Any]]:
    """Validity overlaps ``[start, end)`` and the record is not tombstoned.

    ``None`` is include_historical: no temporal clause and no tombstone clause."""
    if window is None:
        return "TRUE", []
    return (
        f"{alias}.valid_from < %s AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %s)"
        f" AND {alias}.deleted_at IS NULL",
        [window.end, window.start],
    )


def metadata_clause(
    alias: str, filters: dict[str, str], predicates: list[Predicate]
) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    member = (
        f"EXISTS (SELECT 1 FROM record_meta m WHERE m.namespace = {alias}.namespace"
        f" AND m.record = {alias}.rowid AND m.key = %s AND "
    )
    for key, value in filters.items():
        clauses.append(member + "md5(m.value) = md5(%s) AND m.value = %s)")
        params += [key, value, value]
    for predicate in predicates:
        if predicate.op in NUMERIC_OPS:
            clauses.append(member + f"m.num {_NUMERIC_SQL[predicate.op]} %s)")
            params += [predicate.key, predicate.number()]
        elif predicate.op == Op.EQ:
            clauses.append(member + "md5(m.value) = md5(%s) AND m.value = %s)")
            params += [predicate.key, predicate.values[0], predicate.values[0]]
        elif predicate.op == Op.NEQ:
            clauses.append(member + "m.value <> %s)")
            params += [predicate.key, predicate.values[0]]
        else:
            clauses.append(
                member + "md5(m.value) = ANY (%s::text[]) AND m.value = ANY (%s::text[]))"
            )
            values = list(predicate.values)
            params += [predicate.key, [_md5(v) for v in values], values]
    return clauses, params


def _md5(value: str) -> str:
    return hashlib.md5(value.encode("utf-8"), usedforsecurity=False).hexdigest()


def scope_clause(
    alias: str, namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """The full pre-filter for one search, as SQL over ``records`` aliased ``alias``."""
    clauses = [f"{alias}.namespace = %s"]
    params: list[Any] = [namespace]
    if request.key is not None:
        clauses.append(f"md5({alias}.key) = md5(%s) AND {alias}.key = %s")
        params += [request.key, request.key]
    for tag in request.tags:
        clauses.append(
            f"EXISTS (SELECT 1 FROM record_tags t WHERE t.namespace = {alias}.namespace"
            f" AND t.record = {alias}.rowid AND md5(t.tag) = md5(%s) AND t.tag = %s)"
        )
        params += [tag, tag]
    meta, meta_params = metadata_clause(alias, request.filter, request.predicates)
    clauses += meta
    params += meta_params
    for column, op, value in request.record_terms():
        clauses.append(f"{alias}.{column} {op} %s")
        params.append(value)
    temporal, temporal_params = temporal_clause(alias, window)
    clauses.append(temporal)
    params += temporal_params
    return " AND ".join(clauses), params

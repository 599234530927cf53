"""The WHERE clause every retrieval leg shares: scope, trust and the temporal rule.

This is the only place the overlap rule of SPEC §3 is written as SQL. Filters are
written as ``rowid IN (…)`` over the tag and metadata tables so SQLite can drive a
selective scope from their indexes instead of scanning the namespace.
"""

from __future__ import annotations

from typing import Any

from memstrata.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from memstrata.domain.time import Window, to_us

_NUMERIC_SQL = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def temporal_clause(
    alias: str, window: Window | None, *, use_index: bool = True
) -> tuple[str, list[Any]]:
    """Validity overlaps ``[start, end)`` and the record is not tombstoned.

    ``None`` is include_historical: no temporal clause and no tombstone clause.
    ``use_index=False`` writes the same test so SQLite will not drive the scan by it."""
    if window is None:
        return "1", []
    col = f"{alias}." if use_index else f"+{alias}."
    return (
        f"{col}valid_from < ? AND ({col}valid_to IS NULL OR {col}valid_to > ?)"
        f" AND {col}deleted_at IS NULL",
        [window.end, window.start],
    )


def metadata_clause(
    alias: str, filters: dict[str, str], predicates: list[Predicate]
) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    member = f"{alias}.rowid IN (SELECT record FROM record_meta WHERE key = ? AND "
    for key, value in filters.items():
        clauses.append(member + "value = ?)")
        params += [key, value]
    for predicate in predicates:
        if predicate.op in NUMERIC_OPS:
            clauses.append(member + f"num {_NUMERIC_SQL[predicate.op]} ?)")
            params += [predicate.key, predicate.number()]
        elif predicate.op == Op.EQ:
            clauses.append(member + "value = ?)")
            params += [predicate.key, predicate.values[0]]
        elif predicate.op == Op.NEQ:
            clauses.append(member + "value <> ?)")
            params += [predicate.key, predicate.values[0]]
        else:
            marks = ", ".join("?" for _ in predicate.values)
            clauses.append(member + f"value IN ({marks}))")
            params += [predicate.key, *predicate.values]
    return clauses, params


def scope_clause(
    alias: str, namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """The full pre-filter for one search, as SQL over ``records`` aliased ``alias``.

    Tag and metadata filters are presumed selective: when there are any (and no key,
    which has its own index), the namespace and temporal terms are written with a
    unary ``+`` so SQLite drives the scan from the filter's index, not the namespace."""
    by_membership = request.key is None and bool(
        request.tags or request.filter or request.predicates
    )
    plus = "+" if by_membership else ""
    clauses = [f"{plus}{alias}.namespace = ?"]
    params: list[Any] = [namespace]
    if request.kind is not None:
        clauses.append(f"{plus}{alias}.kind = ?")
        params.append(request.kind)
    if request.key is not None:
        clauses.append(f"{alias}.key = ?")
        params.append(request.key)
    for tag in request.tags:
        clauses.append(f"{alias}.rowid IN (SELECT record FROM record_tags WHERE tag = ?)")
        params.append(tag)
    meta, meta_params = metadata_clause(alias, request.filter, request.predicates)
    clauses += meta
    params += meta_params
    if request.created_after is not None:
        clauses.append(f"{alias}.created_at > ?")
        params.append(to_us(request.created_after))
    if request.created_before is not None:
        clauses.append(f"{alias}.created_at < ?")
        params.append(to_us(request.created_before))
    if request.min_trust == "verified":
        clauses.append(f"{alias}.trust = 'verified'")
    temporal, temporal_params = temporal_clause(alias, window, use_index=not by_membership)
    clauses.append(temporal)
    params += temporal_params
    return " AND ".join(clauses), params

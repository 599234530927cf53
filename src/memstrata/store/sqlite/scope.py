"""The WHERE clause every retrieval leg shares: scope, trust and the temporal rule.

This is the only place the overlap rule of SPEC §3 is written as SQL. Tag and
metadata filters are rows of ``record_tags`` / ``record_meta``, indexed by
namespace first; those rows repeat their record's validity, so a filtered scope
can be decided from one index range without reading a record row.
"""

from __future__ import annotations

from typing import Any

from memstrata.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from memstrata.domain.time import Window
from memstrata.store.members import Member

_NUMERIC_SQL = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def temporal_clause(
    alias: str, window: Window | None, *, use_index: bool = True
) -> tuple[str, list[Any]]:
    """Validity overlaps ``[start, end)`` and the record is not tombstoned.

    ``alias`` is ``records`` or a scope row, which carry the same three columns.
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


def _rows(member: Member, alias: str) -> str:
    """The namespace and the member's test, over its rows aliased ``alias``."""
    return f"{alias}.namespace = ? AND {member.on(alias)}"


def _subquery(member: Member) -> str:
    return f"SELECT record FROM {member.table} m WHERE {_rows(member, 'm')}"


def _members(filters: dict[str, str], predicates: list[Predicate], tags: list[str]) -> list[Member]:
    members = [Member("record_tags", "{c}tag = ?", (tag,)) for tag in tags]
    members += [
        Member("record_meta", "{c}key = ? AND {c}value = ?", (key, value))
        for key, value in filters.items()
    ]
    for predicate in predicates:
        values: list[Any]
        if predicate.op in NUMERIC_OPS:
            test, values = f"{{c}}num {_NUMERIC_SQL[predicate.op]} ?", [predicate.number()]
        elif predicate.op == Op.EQ:
            test, values = "{c}value = ?", [predicate.values[0]]
        elif predicate.op == Op.NEQ:
            test, values = "{c}value <> ?", [predicate.values[0]]
        else:
            test = f"{{c}}value IN ({', '.join('?' for _ in predicate.values)})"
            values = list(predicate.values)
        members.append(Member("record_meta", "{c}key = ? AND " + test, (predicate.key, *values)))
    return members


def _membership(column: str, namespace: str, members: list[Member]) -> tuple[list[str], list[Any]]:
    """``column IN (…)`` per member, ``column`` being a record rowid."""
    clauses = [f"{column} IN ({_subquery(member)})" for member in members]
    params: list[Any] = []
    for member in members:
        params += [namespace, *member.params]
    return clauses, params


def metadata_clause(
    column: str,
    namespace: str,
    filters: dict[str, str],
    predicates: list[Predicate],
    tags: list[str],
) -> tuple[list[str], list[Any]]:
    """The tag and metadata filters and predicates, as ``column IN (…)`` over record
    rowids."""
    return _membership(column, namespace, _members(filters, predicates, tags))


def _record_clauses(alias: str, request: SearchRequest, plus: str) -> tuple[list[str], list[Any]]:
    """The scope terms only a record row can answer: kind, creation time and trust.
    ``plus`` ("+") keeps SQLite from driving the scan by the kind index."""
    terms = request.record_terms()
    clauses = [
        f"{plus if column == 'kind' else ''}{alias}.{column} {op} ?" for column, op, _ in terms
    ]
    return clauses, [value for _, _, value in terms]


def scope_clause(
    alias: str, namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """The full pre-filter for one search, as SQL over ``records`` aliased ``alias``.

    Tag and metadata filters are presumed selective: when there are any (and no key,
    which has its own index), the namespace and temporal terms are written with a
    unary ``+`` so SQLite drives the scan from the filter's index, not the namespace."""
    members = _members(request.filter, request.predicates, request.tags)
    by_membership = request.key is None and bool(members)
    plus = "+" if by_membership else ""
    clauses = [f"{plus}{alias}.namespace = ?"]
    params: list[Any] = [namespace]
    if request.key is not None:
        clauses.append(f"{alias}.key = ?")
        params.append(request.key)
    member_clauses, member_params = _membership(f"{alias}.rowid", namespace, members)
    record_clauses, record_params = _record_clauses(alias, request, plus)
    temporal, temporal_params = temporal_clause(alias, window, use_index=not by_membership)
    clauses += [*member_clauses, *record_clauses, temporal]
    params += [*member_params, *record_params, *temporal_params]
    return " AND ".join(clauses), params


def scope_rowids(
    namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """A SELECT of the rowid of every record in the search's scope (``scope_clause``'s
    scope), for the vector lane, which needs all of them.

    With a tag or metadata filter and no key, the first filter drives: its index range
    holds each member's namespace and validity, so the temporal rule is tested on those
    rows and a record row is read only when kind, creation time or trust is asked."""
    members = _members(request.filter, request.predicates, request.tags)
    if request.key is not None or not members:
        where, where_params = scope_clause("r", namespace, request, window)
        return f"SELECT r.rowid AS record FROM records r WHERE {where}", where_params
    driver, *others = members
    clauses = [_rows(driver, "d")]
    params: list[Any] = [namespace, *driver.params]
    other_clauses, other_params = _membership("d.record", namespace, others)
    record_clauses, record_params = _record_clauses("r", request, "")
    temporal, temporal_params = temporal_clause("d", window)
    clauses += [*other_clauses, *record_clauses, temporal]
    params += [*other_params, *record_params, *temporal_params]
    rows = f"{driver.table} d"
    if record_clauses:
        rows += " CROSS JOIN records r ON r.rowid = d.record"
    return f"SELECT d.record FROM {rows} WHERE {' AND '.join(clauses)}", params

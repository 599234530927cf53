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
from memstrata.store.members import Member

_NUMERIC_SQL = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def temporal_clause(alias: str, window: Window | None) -> tuple[str, list[Any]]:
    """Validity overlaps ``[start, end)`` and the record is not tombstoned.

    ``alias`` is ``records`` or a scope row, which carry the same three columns.
    ``None`` is include_historical: no temporal clause and no tombstone clause."""
    if window is None:
        return "TRUE", []
    return (
        f"{alias}.valid_from < %s AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %s)"
        f" AND {alias}.deleted_at IS NULL",
        [window.end, window.start],
    )


def _exists_one(member: Member, namespace: str, rowid: str) -> str:
    """The member's test as ``EXISTS`` for the record whose namespace and rowid are given."""
    return (
        f"EXISTS (SELECT 1 FROM {member.table} m WHERE m.namespace = {namespace}"
        f" AND m.record = {rowid} AND {member.on('m')})"
    )


def _members(tags: list[str], filters: dict[str, str], predicates: list[Predicate]) -> list[Member]:
    members = [
        Member("record_tags", "md5({c}tag) = md5(%s) AND {c}tag = %s", (tag, tag)) for tag in tags
    ]
    equal = "{c}key = %s AND md5({c}value) = md5(%s) AND {c}value = %s"
    members += [Member("record_meta", equal, (k, v, v)) for k, v in filters.items()]
    for predicate in predicates:
        key = predicate.key
        if predicate.op in NUMERIC_OPS:
            test = f"{{c}}key = %s AND {{c}}num {_NUMERIC_SQL[predicate.op]} %s"
            members.append(Member("record_meta", test, (key, predicate.number())))
        elif predicate.op == Op.EQ:
            value = predicate.values[0]
            members.append(Member("record_meta", equal, (key, value, value)))
        elif predicate.op == Op.NEQ:
            test = "{c}key = %s AND {c}value <> %s"
            members.append(Member("record_meta", test, (key, predicate.values[0])))
        else:
            test = (
                "{c}key = %s AND md5({c}value) = ANY (%s::text[]) AND {c}value = ANY (%s::text[])"
            )
            values = list(predicate.values)
            members.append(Member("record_meta", test, (key, [_md5(v) for v in values], values)))
    return members


def _exists(members: list[Member], namespace: str, rowid: str) -> tuple[list[str], list[Any]]:
    params: list[Any] = []
    for member in members:
        params += member.params
    return [_exists_one(member, namespace, rowid) for member in members], params


def metadata_clause(
    alias: str, filters: dict[str, str], predicates: list[Predicate], tags: list[str]
) -> tuple[list[str], list[Any]]:
    """The tag and metadata filters and predicates, as ``EXISTS`` over records aliased
    ``alias``."""
    return _exists(_members(tags, filters, predicates), f"{alias}.namespace", f"{alias}.rowid")


def _md5(value: str) -> str:
    return hashlib.md5(value.encode("utf-8"), usedforsecurity=False).hexdigest()


def _record_clauses(alias: str, request: SearchRequest) -> tuple[list[str], list[Any]]:
    """The scope terms only a record row can answer: kind, creation time and trust."""
    terms = request.record_terms()
    return [f"{alias}.{column} {op} %s" for column, op, _ in terms], [v for _, _, v in terms]


def scope_clause(
    alias: str, namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """The full pre-filter for one search, as SQL over ``records`` aliased ``alias``."""
    clauses = [f"{alias}.namespace = %s"]
    params: list[Any] = [namespace]
    if request.key is not None:
        clauses.append(f"md5({alias}.key) = md5(%s) AND {alias}.key = %s")
        params += [request.key, request.key]
    members = _members(request.tags, request.filter, request.predicates)
    member_clauses, member_params = _exists(members, f"{alias}.namespace", f"{alias}.rowid")
    record_clauses, record_params = _record_clauses(alias, request)
    temporal, temporal_params = temporal_clause(alias, window)
    clauses += [*member_clauses, *record_clauses, temporal]
    params += [*member_params, *record_params, *temporal_params]
    return " AND ".join(clauses), params


def scope_rowids(
    namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """A SELECT of the rowid (as ``record``) of every record in the search's scope
    (``scope_clause``'s scope), for the vector lane.

    With a tag or metadata filter and no key, the first filter drives: its rows hold
    each member's validity, so the temporal rule is tested on them and a record row
    is read only when kind, creation time or trust is asked."""
    members = _members(request.tags, request.filter, request.predicates)
    if request.key is not None or not members:
        where, where_params = scope_clause("r", namespace, request, window)
        return f"SELECT r.rowid AS record FROM records r WHERE {where}", where_params
    driver, *others = members
    clauses = [f"d.namespace = %s AND {driver.on('d')}"]
    params: list[Any] = [namespace, *driver.params]
    other_clauses, other_params = _exists(others, "d.namespace", "d.record")
    record_clauses, record_params = _record_clauses("r", request)
    temporal, temporal_params = temporal_clause("d", window)
    clauses += [*other_clauses, *record_clauses, temporal]
    params += [*other_params, *record_params, *temporal_params]
    rows = f"{driver.table} d"
    if record_clauses:
        rows += " JOIN records r ON r.namespace = d.namespace AND r.rowid = d.record"
    return f"SELECT d.record FROM {rows} WHERE {' AND '.join(clauses)}", params

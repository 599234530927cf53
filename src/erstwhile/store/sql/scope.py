"""The WHERE clause every retrieval leg shares: scope, trust and the temporal rule.

This is the only place the overlap rule of SPEC §3 is written as SQL, for both
dialects. Tag and metadata filters are rows of ``record_tags`` / ``record_meta``,
indexed by namespace first; those rows repeat their record's validity, so a
filtered scope can be decided from one index range without reading a record row.
The dialect words what its engine spells apart: text equality (PostgreSQL matches
``md5`` first so an index holds any length), how a member is tested (``IN`` or
``EXISTS``), and hints that keep SQLite from driving a scan by the wrong index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from erstwhile.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from erstwhile.domain.time import Window
from erstwhile.store.sql.dialect import Dialect
from erstwhile.store.sql.members import Member

_NUMERIC_SQL = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def temporal_clause(
    d: Dialect,
    alias: str,
    window: Window | None,
    *,
    use_index: bool = True,
    tombstones: bool = True,
) -> tuple[str, list[Any]]:
    """Validity overlaps ``[start, end)`` and the record is not tombstoned.

    ``alias`` is ``records`` or a scope row, which carry the same three columns, or
    (``tombstones=False``) a graph edge, which has validity and no tombstone.
    ``None`` is include_historical: no temporal clause and no tombstone clause.
    ``use_index=False`` writes the same test so the planner will not drive the scan by it."""
    if window is None:
        return d.true, []

    def col(name: str) -> str:
        return f"{alias}.{name}" if use_index else d.unindexed(f"{alias}.{name}")

    tombstone = f" AND {col('deleted_at')} IS NULL" if tombstones else ""
    return (
        f"{col('valid_from')} < ? AND ({col('valid_to')} IS NULL OR {col('valid_to')} > ?)"
        f"{tombstone}",
        [window.end, window.start],
    )


#: The scope rows (tags, metadata) of current records, and of replaced versions
#: (:mod:`erstwhile.store.sql.past`), which have the same columns.
CURRENT_ROWS = ("record_tags", "record_meta")
PAST_ROWS = ("past_tags", "past_meta")


def _members(
    d: Dialect,
    filters: dict[str, str],
    predicates: list[Predicate],
    tags: list[str],
    rows: tuple[str, str] = CURRENT_ROWS,
) -> list[Member]:
    """Tags, then metadata filters, then predicates, each as a member test."""
    tag_rows, meta_rows = rows
    members = []
    for tag in tags:
        test, values = d.text_equals("{c}tag", tag)
        members.append(Member(tag_rows, test, tuple(values)))
    for key, value in filters.items():
        test, values = d.text_equals("{c}value", value)
        members.append(Member(meta_rows, "{c}key = ? AND " + test, (key, *values)))
    for predicate in predicates:
        key = predicate.key
        if predicate.op in NUMERIC_OPS:
            test = f"{{c}}key = ? AND {{c}}num {_NUMERIC_SQL[predicate.op]} ?"
            members.append(Member(meta_rows, test, (key, predicate.number())))
            continue
        if predicate.op == Op.EQ:
            test, values = d.text_equals("{c}value", predicate.values[0])
        elif predicate.op == Op.NEQ:
            test, values = "{c}value <> ?", [predicate.values[0]]
        else:
            test, values = d.text_in("{c}value", predicate.values)
        members.append(Member(meta_rows, "{c}key = ? AND " + test, (key, *values)))
    return members


#: How many members of a scope PostgreSQL may plan as joins (choosing which drives the
#: scan); the rest are tested on each row. Planning the joins of a scope grows faster
#: than their count (128 tag members: 12 s), a test per row linearly.
JOINED_MEMBERS = 4


def _placed(
    d: Dialect, members: list[Member], namespace_column: str, rowid: str, namespace: str
) -> tuple[list[str], list[Any]]:
    """Each member tested against the record whose namespace and rowid are the given
    columns: ``rowid IN (…)`` or a correlated ``EXISTS``, as the dialect prefers, all
    of them as one clause (:func:`conjunction`)."""
    clauses: list[str] = []
    params: list[Any] = []
    for member in members:
        if d.membership == "in":
            clauses.append(
                f"{rowid} IN (SELECT record FROM {member.table} m"
                f" WHERE m.namespace = ? AND {member.on('m')})"
            )
            params += [namespace, *member.params]
        else:
            # past the first few, a member is a test of each row (OFFSET 0 keeps it from
            # being pulled up into a join): planning joins grows faster than their count
            # — and names its namespace as a value: a subquery kept apart is planned
            # apart, and on Citus only a value routes it to the namespace's shard (the
            # outer row's column did not: a FOR UPDATE over it could not be planned)
            apart = len(clauses) >= JOINED_MEMBERS
            pinned = "?" if apart else namespace_column
            clauses.append(
                f"EXISTS (SELECT 1 FROM {member.table} m WHERE m.namespace = {pinned}"
                f" AND m.record = {rowid} AND {member.on('m')}{' OFFSET 0' if apart else ''})"
            )
            params += [namespace, *member.params] if apart else member.params
    return ([conjunction(clauses)] if clauses else []), params


def conjunction(clauses: list[str]) -> str:
    """``clauses`` joined by AND as a balanced tree, the same terms in the same order:
    SQLite refuses an expression nested past 1,000 levels, and ``a AND b AND c …``
    nests one level per term, so a scope of many members is written ``(… AND …) AND
    (… AND …)``, log2(n) levels deep. The planner splits nested ANDs into the same
    terms either way."""
    if len(clauses) <= 2:
        return " AND ".join(clauses)
    half = len(clauses) // 2
    return f"({conjunction(clauses[:half])}) AND ({conjunction(clauses[half:])})"


def metadata_clause(
    d: Dialect,
    alias: str,
    namespace: str,
    filters: dict[str, str],
    predicates: list[Predicate],
    tags: list[str],
) -> tuple[list[str], list[Any]]:
    """The tag and metadata filters and predicates, over records aliased ``alias``."""
    members = _members(d, filters, predicates, tags)
    return _placed(d, members, f"{alias}.namespace", f"{alias}.rowid", namespace)


def _record_clauses(
    d: Dialect, alias: str, request: SearchRequest, hint: bool
) -> tuple[list[str], list[Any]]:
    """The scope terms only a record row can answer: kind, creation time and trust.
    ``hint`` keeps the planner from driving the scan by the kind index."""
    clauses = []
    for column, op, _ in request.record_terms():
        name = f"{alias}.{column}"
        clauses.append(f"{d.unindexed(name) if hint and column == 'kind' else name} {op} ?")
    return clauses, [value for _, _, value in request.record_terms()]


def scope_clause(
    d: Dialect,
    alias: str,
    namespace: str,
    request: SearchRequest,
    window: Window | None,
    rows: tuple[str, str] = CURRENT_ROWS,
    *,
    probed: bool = False,
) -> tuple[str, list[Any]]:
    """The full pre-filter for one search, as SQL over ``records`` aliased ``alias``
    (or over ``record_past``, whose scope rows are ``PAST_ROWS``).

    Tag and metadata filters are presumed selective: when there are any (and no key,
    which has its own index), the namespace and temporal terms are written unindexed
    so the scan is driven from the filter's index, not the namespace. ``probed``: the
    rows are reached from elsewhere (the lexical lane's postings), so each member is a
    test of the row, never a list the planner walks for every row it reaches."""
    members = _members(d, request.filter, request.predicates, request.tags, rows)
    by_membership = request.key is None and bool(members)
    namespace_column = f"{alias}.namespace"
    clauses = [f"{d.unindexed(namespace_column) if by_membership else namespace_column} = ?"]
    params: list[Any] = [namespace]
    if request.key is not None:
        key_test, key_params = d.text_equals(f"{alias}.key", request.key)
        clauses.append(key_test)
        params += key_params
    rowid = d.unindexed(f"{alias}.rowid") if probed else f"{alias}.rowid"
    member_clauses, member_params = _placed(d, members, namespace_column, rowid, namespace)
    record_clauses, record_params = _record_clauses(d, alias, request, by_membership)
    temporal, temporal_params = temporal_clause(d, alias, window, use_index=not by_membership)
    clauses += [*member_clauses, *record_clauses, temporal]
    params += [*member_params, *record_params, *temporal_params]
    return " AND ".join(clauses), params


def scope_rowids(
    d: Dialect, namespace: str, request: SearchRequest, window: Window | None
) -> tuple[str, list[Any]]:
    """A SELECT of the rowid (as ``record``) of every record in the search's scope
    (``scope_clause``'s scope), for the vector lane, which needs all of them.

    With a tag or metadata filter and no key, the first filter drives: its index range
    holds each member's namespace and validity, so the temporal rule is tested on those
    rows and a record row is read only when kind, creation time or trust is asked."""
    members = _members(d, request.filter, request.predicates, request.tags)
    if request.key is not None or not members:
        where, where_params = scope_clause(d, "r", namespace, request, window)
        return f"SELECT r.rowid AS record FROM records r WHERE {where}", where_params
    driver, *others = members
    clauses = [f"d.namespace = ? AND {driver.on('d')}"]
    params: list[Any] = [namespace, *driver.params]
    other_clauses, other_params = _placed(d, others, "d.namespace", "d.record", namespace)
    record_clauses, record_params = _record_clauses(d, "r", request, False)
    temporal, temporal_params = temporal_clause(d, "d", window)
    clauses += [*other_clauses, *record_clauses, temporal]
    params += [*other_params, *record_params, *temporal_params]
    rows = f"{driver.table} d"
    if record_clauses:
        rows += " " + d.records_join("r", "d")
    return f"SELECT d.record FROM {rows} WHERE {' AND '.join(clauses)}", params


def known_clause(alias: str, known_at: int, *, past: bool) -> tuple[str, list[Any]]:
    """Record time (SPEC §3, ``known_at``): the version had been recorded by
    ``known_at`` and was not yet replaced then. A current row is known over
    ``[updated_at, ∞)``; a replaced one (``record_past``) over ``[known_from, known_to)``."""
    if past:
        return f"{alias}.known_from <= ? AND {alias}.known_to > ?", [known_at, known_at]
    return f"{alias}.updated_at <= ?", [known_at]


@dataclass(frozen=True)
class Known:
    """One half of a namespace as known at a past instant, in a search's scope: the
    current rows already recorded then, or the replaced versions current then.
    ``record`` is the column of ``table`` (aliased as given) that holds the record's
    rowid; ``where`` is the scope and the record-time clause."""

    table: str
    record: str
    where: str
    params: list[Any]


def known_scope(
    d: Dialect,
    alias: str,
    namespace: str,
    request: SearchRequest,
    window: Window | None,
    known_at: int,
    *,
    probed: bool = False,
) -> tuple[Known, Known]:
    """The search's scope over the records as known at ``known_at``: the same scope
    clause on each half, each with its record-time clause. Each record is in at most
    one half (its version of that instant)."""
    halves = []
    for table, record, rows, past in (
        ("records", "rowid", CURRENT_ROWS, False),
        ("record_past", "record", PAST_ROWS, True),
    ):
        where, params = scope_clause(d, alias, namespace, request, window, rows, probed=probed)
        known, known_params = known_clause(alias, known_at, past=past)
        halves.append(Known(table, record, f"{where} AND {known}", [*params, *known_params]))
    return halves[0], halves[1]

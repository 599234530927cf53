"""Record time: what the store keeps of a record's replaced versions, for both dialects.

A record's current version is its ``records`` row, known from its ``updated_at`` on.
When a write replaces it, the outgoing row is copied into ``record_past`` with its
record-time range ``[known_from, known_to)`` (``known_to`` = the replacing version's
``updated_at``), its tag and metadata rows into ``past_tags`` / ``past_meta`` (the same
columns as ``record_tags`` / ``record_meta``, so :mod:`erstwhile.store.sql.scope`
renders one scope over either). The postings of a content a record no longer holds
are kept by the lexical lane (``past_postings``, :mod:`erstwhile.store.sql.lexical`),
its vectors by the dialect (``past_vectors``), both by content hash.
A hard delete takes all of it with the record (cascades), so it is gone from the past.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from erstwhile.domain.time import to_us
from erstwhile.store.sql.dialect import Dialect, Tx
from erstwhile.store.sql.rows import (
    ROW_FIELDS,
    prefixed,
    record_from_snapshot,
    row_values,
    scope_rows,
)
from erstwhile.store.sql.scope import known_clause

_FIELDS = ", ".join(ROW_FIELDS)


#: The outgoing row's copy into the past (parameters: known_to, namespace, rowid).
KEEP_ROW = (
    f"INSERT INTO record_past (record, known_from, known_to, {_FIELDS})"
    f" SELECT rowid, updated_at, ?, {_FIELDS} FROM records WHERE namespace = ? AND rowid = ?"
)


def keep_scope(d: Dialect, past: str) -> tuple[str, str]:
    """The copies of the outgoing row's tag and metadata rows into the past, each
    record's rows pointing at ``past`` (an expression that comes first among the
    parameters; then namespace, rowid)."""
    ns = d.unindexed("namespace")
    tags = (
        "INSERT INTO past_tags (namespace, tag, record, valid_from, valid_to, deleted_at)"
        f" SELECT namespace, tag, {past}, valid_from, valid_to, deleted_at FROM record_tags"
        f" WHERE {ns} = ? AND record = ?"
    )
    meta = (
        "INSERT INTO past_meta (namespace, key, value, record, num, valid_from, valid_to,"
        f" deleted_at) SELECT namespace, key, value, {past}, num, valid_from, valid_to,"
        f" deleted_at FROM record_meta WHERE {ns} = ? AND record = ?"
    )
    return tags, meta


def keep(d: Dialect, tx: Tx, namespace: str, rowid: int, known_to: int) -> str:
    """Copies the record's current row (about to be replaced at ``known_to``) into the
    past, with its scope rows. Returns the content hash of the outgoing version."""
    row = tx.execute(
        KEEP_ROW + " RETURNING rowid, content_hash", (known_to, namespace, rowid)
    ).fetchone()
    past = int(row[0])
    for statement in keep_scope(d, "?"):
        tx.execute(statement, (past, namespace, rowid))
    return str(row[1])


def known_rows(
    d: Dialect,
    tx: Tx,
    namespace: str,
    known_at: int,
    values: Sequence[Any],
    *,
    by: str = "rowid",
) -> list[Any]:
    """The rows (``COLUMNS``, the rowid being the record's, then when that version was
    replaced or NULL) of the named records as known at ``known_at``, named by record
    ``rowid`` or by ``id``."""

    def known(past: bool) -> tuple[str, list[Any]]:
        clause, params = known_clause("r", known_at, past=past)
        return f" AND {clause}", params

    return _versions(d, tx, namespace, values, by, known)


def stored_versions(
    d: Dialect, tx: Tx, namespace: str, record_ids: Sequence[str], known_at: int | None
) -> list[Any]:
    """Every stored version of the named records (``COLUMNS``, then when that version
    was replaced or NULL while current): the replaced ones of ``record_past`` and the
    current row; with ``known_at``, those already recorded then."""

    def recorded(past: bool) -> tuple[str, list[Any]]:
        if known_at is None:
            return "", []
        return f" AND r.{'known_from' if past else 'updated_at'} <= ?", [known_at]

    return _versions(d, tx, namespace, record_ids, "id", recorded)


def _versions(
    d: Dialect,
    tx: Tx,
    namespace: str,
    values: Sequence[Any],
    by: str,
    condition: Callable[[bool], tuple[str, list[Any]]],
) -> list[Any]:
    """The current rows and the replaced versions of the records named by ``rowid`` or
    ``id``, each half narrowed by ``condition(past)`` (a clause starting " AND ", or
    empty), with when each version was replaced (NULL while current)."""
    parts, params = [], []
    # by rowid, the rowids drive (the planner would rather range over the namespace)
    ns_column = d.unindexed("r.namespace") if by == "rowid" else "r.namespace"
    for table, column, past in (("records", "rowid", False), ("record_past", "record", True)):
        test, test_params = d.in_list(f"r.{column if by == 'rowid' else 'id'}", values)
        clause, clause_params = condition(past)
        until = "r.known_to" if past else "CAST(NULL AS BIGINT)"
        parts.append(
            f"SELECT {prefixed('r', column)}, {until} AS known_until FROM {table} r"
            f" WHERE {ns_column} = ? AND {test}{clause}"
        )
        params += [namespace, *test_params, *clause_params]
    return list(tx.execute(" UNION ALL ".join(parts), params).fetchall())


def version_row(d: Dialect, tx: Tx, namespace: str, record_id: str, version: int) -> Any | None:
    """Version ``version`` of the record (``COLUMNS``, the rowid being the record's,
    then when it was replaced): its current row or the past row that kept it; None
    when it has no such version."""
    rows = _versions(d, tx, namespace, [record_id], "id",
                     lambda past: (" AND r.version = ?", [version]))  # fmt: skip
    return rows[0] if rows else None


def version_numbers(tx: Tx, namespace: str, record_id: str) -> list[int]:
    """The numbers of every stored version of the record, in order."""
    rows = tx.execute(
        "SELECT version FROM records WHERE namespace = ? AND id = ?"
        " UNION ALL SELECT version FROM record_past WHERE namespace = ? AND id = ?"
        " ORDER BY version",
        (namespace, record_id) * 2,
    ).fetchall()
    return [int(row[0]) for row in rows]


def drop_versions(tx: Tx) -> None:
    """The versions table goes (SQLite m014, PostgreSQL m013): a record's versions are
    its row and the past rows that kept the ones it replaced (every replacement keeps
    one since record time was kept; any version of an older store the past does not
    hold yet is copied into it first). Every write used to add a verbatim copy of the
    version it wrote, a tenth of the file and of a batch's inserts, read only by
    version reads, the change feed and export, which now read the row and the past."""
    backfill(tx, missing=True)
    tx.execute("DROP TABLE record_versions")


def backfill(tx: Tx, *, missing: bool = False) -> None:
    """Fills the past from ``record_versions`` (a store written before record time was
    kept): every version but the current one, known until the next version's
    ``updated_at``; with ``missing``, only those the past does not hold yet (before
    the versions table goes: the versions of just the records missing one are read)."""
    kept: set[tuple[int, int]] = set()
    only = ""
    if missing:
        lacking = (
            "SELECT r.rowid FROM record_versions v JOIN records r ON r.namespace = v.namespace"
            " AND r.id = v.id WHERE v.version < r.version AND NOT EXISTS (SELECT 1 FROM"
            " record_past p WHERE p.namespace = r.namespace AND p.record = r.rowid"
            " AND p.version = v.version)"
        )
        only = f" WHERE r.rowid IN ({lacking})"
        kept = {
            (int(r), int(v))
            for r, v in tx.execute(
                f"SELECT p.record, p.version FROM record_past p WHERE p.record IN ({lacking})"
            )
        }
    rows = tx.execute(
        "SELECT r.rowid, r.version, v.version, v.body, v.payload FROM record_versions v"
        f" JOIN records r ON r.namespace = v.namespace AND r.id = v.id{only}"
        " ORDER BY v.namespace, v.id, v.version"
    ).fetchall()
    by_record: dict[int, list[tuple[int, str, Any]]] = {}
    for rowid, current, version, body, payload in rows:
        if version <= current:
            by_record.setdefault(rowid, []).append((version, body, payload))
    for rowid, versions in by_record.items():
        records = [record_from_snapshot(body, payload) for _, body, payload in versions]
        for record, after in itertools.pairwise(records):
            assert after.updated_at is not None and record.updated_at is not None
            if (rowid, record.version) in kept:
                continue
            values = row_values(record)
            names = list(values)
            inserted = tx.execute(
                f"INSERT INTO record_past (record, known_from, known_to, {', '.join(names)})"
                f" VALUES (?, ?, ?, {', '.join('?' for _ in names)}) RETURNING rowid",
                [rowid, to_us(record.updated_at), to_us(after.updated_at),
                 *values.values()],
            ).fetchone()  # fmt: skip
            tags, meta = scope_rows(record, values, int(inserted[0]))
            if tags:
                tx.executemany(
                    "INSERT INTO past_tags (namespace, tag, record, valid_from, valid_to,"
                    " deleted_at) VALUES (?, ?, ?, ?, ?, ?)",
                    tags,
                )
            if meta:
                tx.executemany(
                    "INSERT INTO past_meta (namespace, key, value, record, num, valid_from,"
                    " valid_to, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    meta,
                )

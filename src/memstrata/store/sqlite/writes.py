"""Mutations of the SQLite store. Each runs inside the caller's transaction and
appends to the ledger; the caller (``SqliteStore``) owns the transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from memstrata.domain import rules
from memstrata.domain.errors import NotFound
from memstrata.domain.records import Record
from memstrata.domain.search import parse_number
from memstrata.domain.time import from_us
from memstrata.store.sqlite.rows import fetch_record, row_values, snapshot_body

_ROW_FIELDS = (
    "namespace", "id", "content", "content_hash", "payload", "metadata", "tags", "kind", "key",
    "trust", "source", "origin", "created_at", "updated_at", "valid_from", "valid_to",
    "deleted_at", "supersedes", "superseded_by", "version",
)  # fmt: skip
_INSERT = (
    f"INSERT INTO records ({', '.join(_ROW_FIELDS)}) "
    f"VALUES ({', '.join(':' + name for name in _ROW_FIELDS)})"
)
_UPDATE = (
    f"UPDATE records SET {', '.join(f'{name} = :{name}' for name in _ROW_FIELDS)} "
    "WHERE rowid = :rowid"
)


def ledger(
    conn: sqlite3.Connection,
    *,
    at: int,
    op: str,
    namespace: str,
    record_id: str,
    version: int | None,
    actor: str,
    detail: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        "INSERT INTO ledger (at, op, namespace, record_id, version, actor, detail)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (at, op, namespace, record_id, version, actor, json.dumps(detail) if detail else None),
    )


def ensure_namespace(conn: sqlite3.Connection, namespace: str, now: int) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO namespaces (name, created_at) VALUES (?, ?)", (namespace, now)
    )


def lookup(conn: sqlite3.Connection, namespace: str, record_id: str) -> tuple[int, Record] | None:
    try:
        return fetch_record(conn, namespace, record_id)
    except KeyError:
        return None


def require(conn: sqlite3.Connection, namespace: str, record_id: str) -> tuple[int, Record]:
    found = lookup(conn, namespace, record_id)
    if found is None:
        raise NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")
    return found


def save(conn: sqlite3.Connection, rowid: int | None, record: Record) -> int:
    """Writes the record's current row, its scope rows, its full-text row and its
    version snapshot. Returns the rowid."""
    values = row_values(record)
    if rowid is None:
        rowid = int(conn.execute(_INSERT, values).lastrowid or 0)
    else:
        conn.execute(_UPDATE, {**values, "rowid": rowid})
        conn.execute("DELETE FROM record_tags WHERE record = ?", (rowid,))
        conn.execute("DELETE FROM record_meta WHERE record = ?", (rowid,))
        conn.execute("DELETE FROM records_fts WHERE rowid = ?", (rowid,))
    # Scope rows repeat the record's namespace and validity (see migration m002); every
    # change to a record comes through here, so they never disagree with its row.
    validity = (values["valid_from"], values["valid_to"], values["deleted_at"])
    conn.executemany(
        "INSERT INTO record_tags (namespace, tag, record, valid_from, valid_to, deleted_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(record.namespace, tag, rowid, *validity) for tag in record.tags],
    )
    conn.executemany(
        "INSERT INTO record_meta (namespace, key, value, record, num, valid_from, valid_to,"
        " deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (record.namespace, key, value, rowid, parse_number(value), *validity)
            for key, value in record.metadata.items()
        ],
    )
    conn.execute("INSERT INTO records_fts (rowid, content) VALUES (?, ?)", (rowid, record.content))
    conn.execute(
        "INSERT INTO record_versions (namespace, id, version, body, payload)"
        " VALUES (?, ?, ?, ?, ?)",
        (record.namespace, record.id, record.version, snapshot_body(record), record.payload),
    )
    return rowid


# Vector seqs come from a counter, not max(seq) + 1: a hard delete removes vector rows,
# and a reused seq would hide the next vector from every cache that saw the removed one.
_NEXT_VECTOR_SEQ = "UPDATE vector_seq SET value = value + 1"


def store_vector(
    conn: sqlite3.Connection, rowid: int, embedder_id: str, vector: np.ndarray
) -> None:
    """Stores a unit-length copy of ``vector``: cosine similarity is then a dot product."""
    data = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(data))
    if norm > 0:
        data = data / norm
    conn.execute(_NEXT_VECTOR_SEQ)
    conn.execute(
        "INSERT INTO vectors (record, embedder_id, dimensions, vector, seq)"
        " VALUES (?, ?, ?, ?, (SELECT value FROM vector_seq))"
        " ON CONFLICT (record, embedder_id) DO UPDATE SET"
        " dimensions = excluded.dimensions, vector = excluded.vector, seq = excluded.seq",
        (rowid, embedder_id, int(data.shape[0]), data.astype("<f4").tobytes()),
    )


def withdraw_vectors(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
    """Marks vectors as gone (no dimensions, no data) under a fresh ``seq`` instead of
    deleting them, so every process's vector cache sees the withdrawal on refresh."""
    conn.execute(_NEXT_VECTOR_SEQ)
    cursor = conn.execute(
        "UPDATE vectors SET dimensions = 0, vector = x'', seq = (SELECT value FROM vector_seq)"
        f" WHERE dimensions > 0 AND {where}",
        list(params),
    )
    return cursor.rowcount


def _key_holder(
    conn: sqlite3.Connection, namespace: str, key: str, record_id: str, now: int
) -> str | None:
    """The id of another current, live record holding ``key``, if any."""
    row = conn.execute(
        "SELECT id FROM records WHERE namespace = ? AND key = ? AND id <> ?"
        " AND deleted_at IS NULL AND superseded_by IS NULL"
        " AND (valid_to IS NULL OR valid_to > ?) LIMIT 1",
        (namespace, key, record_id, now),
    ).fetchone()
    return row[0] if row else None


def _has_predecessor(conn: sqlite3.Connection, namespace: str, record_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM records WHERE namespace = ? AND superseded_by = ? LIMIT 1",
        (namespace, record_id),
    ).fetchone()
    return row is not None


def _close_superseded(
    conn: sqlite3.Connection,
    namespace: str,
    new: Record,
    old_id: str,
    field: str,
    *,
    now: int,
    actor: str,
) -> Record:
    """Closes ``old_id`` at the new record's valid_from and points it at the new one."""
    assert new.valid_from is not None
    found = lookup(conn, namespace, old_id)
    if found is None:
        raise NotFound(f"{field} names {old_id!r}, which does not exist in namespace {namespace!r}")
    rowid, old = found
    closed = rules.supersession_closure(old, new, field, now)
    if closed is None:
        return old
    save(conn, rowid, closed)
    ledger(conn, at=now, op="close", namespace=namespace, record_id=old_id,
           version=closed.version, actor=actor, detail={"superseded_by": new.id})  # fmt: skip
    return old


def upsert_one(
    conn: sqlite3.Connection,
    namespace: str,
    index: int,
    incoming: Record,
    *,
    now: int,
    actor: str,
    embedder_id: str | None,
) -> tuple[str, int]:
    field = f"records[{index}]"
    found = lookup(conn, namespace, incoming.id)
    rowid, existing = found if found else (None, None)
    record = rules.revision(
        incoming, existing, field, namespace=namespace, now=now,
        has_predecessor=lambda: _has_predecessor(conn, namespace, incoming.id),
    )  # fmt: skip
    for position, old_id in enumerate(record.supersedes):
        old = _close_superseded(
            conn, namespace, record, old_id, f"{field}.supersedes[{position}]",
            now=now, actor=actor,
        )  # fmt: skip
        if record.key is None and old.key is not None:
            record.key = old.key
    if record.key is not None and rules.claims_key(record, now):
        holder = _key_holder(conn, namespace, record.key, record.id, now)
        if holder is not None:
            raise rules.key_conflict(field, record, holder)
    content_changed = existing is not None and existing.content != record.content
    rowid = save(conn, rowid, record)
    if content_changed:
        withdraw_vectors(conn, "record = ?", [rowid])  # they were derived from the old text
    if incoming.vector is not None and embedder_id is not None:
        store_vector(conn, rowid, embedder_id, np.asarray(incoming.vector, dtype=np.float32))
    assert record.version is not None
    ledger(conn, at=now, op=rules.write_op(existing, record), namespace=namespace,
           record_id=record.id, version=record.version, actor=actor)  # fmt: skip
    return record.id, record.version


def upsert_many(
    conn: sqlite3.Connection,
    namespace: str,
    records: Sequence[Record],
    *,
    now: int,
    actor: str,
    embedder_id: str | None,
) -> list[tuple[str, int]]:
    ensure_namespace(conn, namespace, now)
    return [
        upsert_one(conn, namespace, i, record, now=now, actor=actor, embedder_id=embedder_id)
        for i, record in enumerate(records)
    ]


def change(
    conn: sqlite3.Connection,
    namespace: str,
    rowid: int,
    record: Record,
    update: dict[str, Any],
    *,
    op: str,
    now: int,
    actor: str,
    detail: dict[str, Any] | None = None,
) -> int:
    """Writes a new version of ``record`` with ``update`` applied."""
    changed = rules.next_version(record, update, now)
    version = changed.version or 0
    save(conn, rowid, changed)
    ledger(conn, at=now, op=op, namespace=namespace, record_id=record.id, version=version,
           actor=actor, detail=detail)  # fmt: skip
    return version


def invalidate(
    conn: sqlite3.Connection, namespace: str, record_id: str, at: int, *, now: int, actor: str
) -> int:
    rowid, record = require(conn, namespace, record_id)
    update = rules.invalidation(record, at)
    if update is None:
        return record.version or 0  # already not valid at `at`: never extend validity
    return change(conn, namespace, rowid, record, update, op="invalidate", now=now, actor=actor)


def soft_delete(
    conn: sqlite3.Connection, namespace: str, record_id: str, *, now: int, actor: str
) -> int:
    rowid, record = require(conn, namespace, record_id)
    if record.deleted_at is not None:
        return record.version or 0  # already tombstoned: nothing to change
    return change(conn, namespace, rowid, record, {"deleted_at": from_us(now)},
                  op="delete", now=now, actor=actor)  # fmt: skip


def hard_delete(
    conn: sqlite3.Connection, namespace: str, record_id: str, *, now: int, actor: str
) -> None:
    """Removes every trace of the record: row, versions, full-text row, and (by
    cascade) tags, metadata, vectors, mentions and the extraction marker. The ledger
    keeps that a hard delete of this id happened, and nothing of its content."""
    rowid, _ = require(conn, namespace, record_id)
    conn.execute("DELETE FROM records_fts WHERE rowid = ?", (rowid,))
    conn.execute("DELETE FROM records WHERE rowid = ?", (rowid,))
    conn.execute(
        "DELETE FROM record_versions WHERE namespace = ? AND id = ?", (namespace, record_id)
    )
    ledger(conn, at=now, op="hard_delete", namespace=namespace, record_id=record_id,
           version=None, actor=actor)  # fmt: skip


def verify(
    conn: sqlite3.Connection, namespace: str, record_id: str, reviewer: str, *, now: int,
    actor: str,
) -> int:  # fmt: skip
    rowid, record = require(conn, namespace, record_id)
    if record.trust == "verified":
        return record.version or 0
    return change(conn, namespace, rowid, record, {"trust": "verified"}, op="verify",
                  now=now, actor=actor, detail={"reviewer": reviewer})  # fmt: skip

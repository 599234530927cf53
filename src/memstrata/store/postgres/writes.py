"""Mutations of the PostgreSQL store. Each runs inside the caller's transaction and
appends to the ledger; the caller (``PostgresStore``) owns the transaction.

The rules are SQLite's (``store/sqlite/writes.py``), statement for statement; what
PostgreSQL adds is locking, because its writers really run at the same time:
every record a write reads and then changes is read ``FOR UPDATE``, and a ``key``
is claimed under a transaction-scoped advisory lock on (namespace, key). So two
writers superseding the same record are serialised, and the second sees the first's
closure and is refused: chains never fork and no write is lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memstrata.domain import rules
from memstrata.domain.errors import NotFound
from memstrata.domain.records import Record
from memstrata.domain.search import parse_number
from memstrata.domain.time import from_us
from memstrata.store.postgres import lexical
from memstrata.store.postgres.connection import Connection
from memstrata.store.sqlite.rows import COLUMNS, record_from_row, row_values, snapshot_body

_ROW_FIELDS = (
    "namespace", "id", "content", "content_hash", "payload", "metadata", "tags", "kind", "key",
    "trust", "source", "origin", "created_at", "updated_at", "valid_from", "valid_to",
    "deleted_at", "supersedes", "superseded_by", "version",
)  # fmt: skip
# rowids are drawn from the identity's sequence up front (Batch.new_rowid), so an
# insert needs no RETURNING and a whole batch is sent without waiting on each row
_INSERT = (
    f"INSERT INTO records (rowid, {', '.join(_ROW_FIELDS)}, tsv) OVERRIDING SYSTEM VALUE "
    f"VALUES (%(rowid)s, {', '.join('%(' + name + ')s' for name in _ROW_FIELDS)},"
    " %(tsv)s::tsvector)"
)
_UPDATE = (
    f"UPDATE records SET {', '.join(f'{name} = %({name})s' for name in _ROW_FIELDS)}, "
    "tsv = coalesce(%(tsv)s::tsvector, tsv) WHERE namespace = %(namespace)s AND rowid = %(rowid)s"
)


def ledger(
    conn: Connection,
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
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (at, op, namespace, record_id, version, actor, json.dumps(detail) if detail else None),
    )


def ensure_namespace(conn: Connection, namespace: str, now: int) -> None:
    conn.execute(
        "INSERT INTO namespaces (name, created_at) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
        (namespace, now),
    )


def lookup(
    conn: Connection, namespace: str, record_id: str, *, lock: bool = True
) -> tuple[int, Record] | None:
    """(rowid, record), locked for the rest of the transaction unless ``lock`` is off."""
    row = conn.execute(
        f"SELECT {COLUMNS} FROM records WHERE namespace = %s AND id = %s"
        + (" FOR UPDATE" if lock else ""),
        (namespace, record_id),
    ).fetchone()
    return (row[0], record_from_row(row)) if row else None


def require(conn: Connection, namespace: str, record_id: str) -> tuple[int, Record]:
    found = lookup(conn, namespace, record_id)
    if found is None:
        raise NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")
    return found


class Batch:
    """What one write transaction has read and written of a namespace's records.

    Records are read once, locked ``FOR UPDATE`` (those a batch names are read and
    locked together, in id order), and remembered as the batch changes them, so
    later records of the batch see earlier ones exactly as the database would."""

    def __init__(self, conn: Connection, namespace: str) -> None:
        self.conn = conn
        self.namespace = namespace
        self.known: dict[str, tuple[int, Record] | None] = {}
        self._rowids: list[int] = []

    def prefetch(self, ids: Sequence[str]) -> None:
        wanted = sorted({i for i in ids if i not in self.known})
        if not wanted:
            return
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM records WHERE namespace = %s AND id = ANY (%s)"
            " ORDER BY id FOR UPDATE",
            (self.namespace, wanted),
        ).fetchall()
        self.known.update(dict.fromkeys(wanted))
        for row in rows:
            self.known[row[2]] = (row[0], record_from_row(row))

    def lookup(self, record_id: str) -> tuple[int, Record] | None:
        if record_id not in self.known:
            self.known[record_id] = lookup(self.conn, self.namespace, record_id)
        return self.known[record_id]

    def reserve(self, count: int) -> None:
        """Draws ``count`` new rowids (in order) for the records about to be created."""
        if count > 0:
            rows = self.conn.execute(
                "SELECT nextval(pg_get_serial_sequence('records', 'rowid'))"
                " FROM generate_series(1, %s)",
                (count,),
            ).fetchall()
            self._rowids += sorted(row[0] for row in rows)

    def new_rowid(self) -> int:
        if not self._rowids:
            self.reserve(1)
        return self._rowids.pop(0)

    def save(self, rowid: int | None, record: Record, *, tsv: str | None = None) -> int:
        """:func:`save`, remembered. ``tsv``: the content's, when it changed."""
        inserted = rowid is None
        rowid = self.new_rowid() if rowid is None else rowid
        save(self.conn, rowid, record, insert=inserted, tsv=tsv)
        self.known[record.id] = (rowid, record)
        return rowid


def save(
    conn: Connection, rowid: int, record: Record, *, insert: bool = False, tsv: str | None = None
) -> None:
    """Writes the record's current row, its scope rows and its version snapshot.
    ``tsv`` is the content's full-text vector: required for an insert, given on an
    update only when the content changed."""
    values = row_values(record)
    values["tsv"] = tsv
    values["rowid"] = rowid
    if insert:
        if tsv is None:
            values["tsv"] = lexical.documents([record.content])[0]
        conn.execute(_INSERT, values)
    else:
        conn.execute(_UPDATE, values)
        conn.execute(
            "DELETE FROM record_tags WHERE namespace = %s AND record = %s",
            (record.namespace, rowid),
        )
        conn.execute(
            "DELETE FROM record_meta WHERE namespace = %s AND record = %s",
            (record.namespace, rowid),
        )
    # Scope rows repeat the record's validity (migration m003); every change to a
    # record comes through here, so they never disagree with its row.
    validity = (values["valid_from"], values["valid_to"], values["deleted_at"])
    with conn.cursor() as cursor:
        if record.tags:
            cursor.executemany(
                "INSERT INTO record_tags (namespace, record, tag, valid_from, valid_to,"
                " deleted_at) VALUES (%s, %s, %s, %s, %s, %s)",
                [(record.namespace, rowid, tag, *validity) for tag in record.tags],
            )
        if record.metadata:
            cursor.executemany(
                "INSERT INTO record_meta (namespace, record, key, value, num, valid_from,"
                " valid_to, deleted_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(record.namespace, rowid, k, v, parse_number(v), *validity)
                 for k, v in record.metadata.items()],
            )  # fmt: skip
    conn.execute(
        "INSERT INTO record_versions (namespace, id, version, body, payload)"
        " VALUES (%s, %s, %s, %s, %s)",
        (record.namespace, record.id, record.version, snapshot_body(record), record.payload),
    )


def unit(vector: np.ndarray) -> np.ndarray:
    """A unit-length float32 copy: cosine similarity is then a dot product."""
    data = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(data))
    return data / norm if norm > 0 else data


def store_vector(
    conn: Connection, namespace: str, rowid: int, embedder_id: str, vector: np.ndarray
) -> None:
    data = unit(vector)
    conn.execute(
        "INSERT INTO vectors (namespace, record, embedder_id, dimensions, embedding)"
        " VALUES (%s, %s, %s, %s, %b)"
        " ON CONFLICT (namespace, record, embedder_id) DO UPDATE SET"
        " dimensions = excluded.dimensions, embedding = excluded.embedding",
        (namespace, rowid, embedder_id, int(data.shape[0]), data),
    )


def _key_holder(conn: Connection, namespace: str, key: str, record_id: str, now: int) -> str | None:
    """The id of another current, live record holding ``key``, if any. Claims the key
    for this transaction first, so two writers of one key are serialised."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{namespace}\x1f{key}",)
    )
    row = conn.execute(
        "SELECT id FROM records WHERE namespace = %s AND md5(key) = md5(%s) AND key = %s"
        " AND id <> %s AND deleted_at IS NULL AND superseded_by IS NULL"
        " AND (valid_to IS NULL OR valid_to > %s) LIMIT 1",
        (namespace, key, key, record_id, now),
    ).fetchone()
    return row[0] if row else None


def _has_predecessor(conn: Connection, namespace: str, record_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM records WHERE namespace = %s AND superseded_by = %s LIMIT 1",
        (namespace, record_id),
    ).fetchone()
    return row is not None


def _close_superseded(
    batch: Batch,
    new: Record,
    old_id: str,
    field: str,
    *,
    now: int,
    actor: str,
) -> Record:
    """Closes ``old_id`` at the new record's valid_from and points it at the new one."""
    assert new.valid_from is not None
    conn, namespace = batch.conn, batch.namespace
    found = batch.lookup(old_id)
    if found is None:
        raise NotFound(f"{field} names {old_id!r}, which does not exist in namespace {namespace!r}")
    rowid, old = found
    closed = rules.supersession_closure(old, new, field, now)
    if closed is None:
        return old
    batch.save(rowid, closed)
    ledger(conn, at=now, op="close", namespace=namespace, record_id=old_id,
           version=closed.version, actor=actor, detail={"superseded_by": new.id})  # fmt: skip
    return old


def upsert_one(
    batch: Batch,
    index: int,
    incoming: Record,
    *,
    tsv: str,
    now: int,
    actor: str,
    embedder_id: str | None,
) -> tuple[str, int]:
    field = f"records[{index}]"
    conn, namespace = batch.conn, batch.namespace
    found = batch.lookup(incoming.id)
    rowid, existing = found if found else (None, None)
    record = rules.revision(
        incoming, existing, field, namespace=namespace, now=now,
        has_predecessor=lambda: _has_predecessor(conn, namespace, incoming.id),
    )  # fmt: skip
    for position, old_id in enumerate(record.supersedes):
        old = _close_superseded(
            batch, record, old_id, f"{field}.supersedes[{position}]", now=now, actor=actor
        )
        if record.key is None and old.key is not None:
            record.key = old.key
    if record.key is not None and rules.claims_key(record, now):
        holder = _key_holder(conn, namespace, record.key, record.id, now)
        if holder is not None:
            raise rules.key_conflict(field, record, holder)
    content_changed = existing is not None and existing.content != record.content
    rowid = batch.save(rowid, record, tsv=tsv if existing is None or content_changed else None)
    if content_changed:  # derived from the old text
        conn.execute("DELETE FROM vectors WHERE namespace = %s AND record = %s", (namespace, rowid))
    if incoming.vector is not None and embedder_id is not None:
        store_vector(conn, namespace, rowid, embedder_id,
                     np.asarray(incoming.vector, dtype=np.float32))  # fmt: skip
    assert record.version is not None
    ledger(conn, at=now, op=rules.write_op(existing, record), namespace=namespace,
           record_id=record.id, version=record.version, actor=actor)  # fmt: skip
    return record.id, record.version


def upsert_many(
    conn: Connection,
    namespace: str,
    records: Sequence[Record],
    *,
    now: int,
    actor: str,
    embedder_id: str | None,
) -> list[tuple[str, int]]:
    ensure_namespace(conn, namespace, now)
    batch = Batch(conn, namespace)
    batch.prefetch([r.id for r in records] + [old for r in records for old in r.supersedes])
    batch.reserve(sum(batch.known.get(r.id) is None for r in records))
    documents = lexical.documents([r.content for r in records])
    return [
        upsert_one(batch, i, record, tsv=documents[i], now=now, actor=actor,
                   embedder_id=embedder_id)
        for i, record in enumerate(records)
    ]  # fmt: skip


def change(
    conn: Connection,
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
    save(conn, rowid, changed)  # the content is unchanged, and so its full-text vector
    ledger(conn, at=now, op=op, namespace=namespace, record_id=record.id, version=version,
           actor=actor, detail=detail)  # fmt: skip
    return version


def invalidate(
    conn: Connection, namespace: str, record_id: str, at: int, *, now: int, actor: str
) -> int:
    rowid, record = require(conn, namespace, record_id)
    update = rules.invalidation(record, at)
    if update is None:
        return record.version or 0  # already not valid at `at`: never extend validity
    return change(conn, namespace, rowid, record, update, op="invalidate", now=now, actor=actor)


def soft_delete(conn: Connection, namespace: str, record_id: str, *, now: int, actor: str) -> int:
    rowid, record = require(conn, namespace, record_id)
    if record.deleted_at is not None:
        return record.version or 0  # already tombstoned: nothing to change
    return change(conn, namespace, rowid, record, {"deleted_at": from_us(now)},
                  op="delete", now=now, actor=actor)  # fmt: skip


def hard_delete(conn: Connection, namespace: str, record_id: str, *, now: int, actor: str) -> None:
    """Removes every trace of the record: the row (with its full-text vector), its
    versions, and by cascade its tags, metadata, vectors, mentions and extraction
    marker. The ledger keeps that a hard delete of this id happened, nothing of its
    content. (Dead row versions are reclaimed by VACUUM, as for any DELETE.)"""
    rowid, _ = require(conn, namespace, record_id)
    conn.execute("DELETE FROM records WHERE namespace = %s AND rowid = %s", (namespace, rowid))
    conn.execute(
        "DELETE FROM record_versions WHERE namespace = %s AND id = %s", (namespace, record_id)
    )
    ledger(conn, at=now, op="hard_delete", namespace=namespace, record_id=record_id,
           version=None, actor=actor)  # fmt: skip


def verify(
    conn: Connection, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str
) -> int:
    rowid, record = require(conn, namespace, record_id)
    if record.trust == "verified":
        return record.version or 0
    return change(conn, namespace, rowid, record, {"trust": "verified"}, op="verify",
                  now=now, actor=actor, detail={"reviewer": reviewer})  # fmt: skip

"""Every write, for both dialects: one transaction's reads and changes of a namespace.

The rules (what a revision is, when a key is held, how supersession closes the old
record) are :mod:`erstwhile.domain.rules`; this module applies them to rows. Every
change of a record goes through :meth:`Writes.save`, so its scope rows and full-text
document never disagree with its row and the version it replaces is kept in the past
(:mod:`erstwhile.store.sql.past`: a record's versions are its row and its past rows),
and every mutation appends to the ledger; except the creation of a record that reads
nothing of the store (the common write), which :meth:`Writes._create` makes straight
from the record: the same rows (tests/store/test_plain_batch.py compares the two ways).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from erstwhile.domain import rules
from erstwhile.domain.errors import NotFound
from erstwhile.domain.records import Record, inheriting
from erstwhile.domain.time import from_us
from erstwhile.domain.vectors import unit
from erstwhile.domain.words import term_counts_of
from erstwhile.store.sql import graph, past
from erstwhile.store.sql.dialect import Dialect, Tx, chunks
from erstwhile.store.sql.lexical import Document
from erstwhile.store.sql.lexical_writes import LexicalWrites
from erstwhile.store.sql.rows import (
    COLUMNS,
    created_row,
    record_from_row,
    row_values,
    scope_kept,
    scope_rows,
)

#: Ids looked up together in one statement (SQLite caps bound parameters).
PREFETCH_CHUNK = 500
#: Whether a new plain record's rows are made straight from it (:meth:`Writes._create`)
#: rather than through the general path (tests switch it off to compare the two).
PLAIN_BATCH = True
#: Whether a next version's row rewrites only the columns it changes
#: (``Dialect.replace_later``'s ``columns``; tests switch it off to compare).
NARROW_UPDATES = True
#: The columns of the rows every write appends beside a record's own row.
TAG_COLUMNS = ("namespace", "tag", "record", "valid_from", "valid_to", "deleted_at")
META_COLUMNS = (
    "namespace", "key", "value", "record", "num", "valid_from", "valid_to", "deleted_at",
)  # fmt: skip
LEDGER_COLUMNS = ("at", "op", "namespace", "record_id", "version", "actor", "detail")
#: The tables of held rows (:meth:`Writes._release`), in the order a record writes them.
_HELD = (
    ("record_tags", TAG_COLUMNS), ("record_meta", META_COLUMNS), ("ledger", LEDGER_COLUMNS),
)  # fmt: skip


def fetch(
    d: Dialect, tx: Tx, namespace: str, record_id: str, *, lock: bool = False
) -> tuple[int, Record] | None:
    """(rowid, record), locked for the rest of the transaction when ``lock`` is set."""
    row = tx.execute(
        f"SELECT {COLUMNS} FROM records WHERE namespace = ? AND id = ?"
        + (d.lock_for_update if lock else ""),
        (namespace, record_id),
    ).fetchone()
    return (row[0], record_from_row(row)) if row else None


def missing(record_id: str, namespace: str) -> NotFound:
    return NotFound(f"record {record_id!r} does not exist in namespace {namespace!r}")


class Writes:
    """What one write transaction has read and written of a namespace's records.

    Records are read once, locked where the dialect locks rows (those a batch names
    are read and locked together, in id order), and remembered as the transaction
    changes them, so later records of a batch see earlier ones exactly as the
    database would."""

    def __init__(self, d: Dialect, tx: Tx, namespace: str, *, now: int, actor: str) -> None:
        self.d = d
        self.tx = tx
        self.namespace = namespace
        self.now = now
        self.actor = actor
        self.known: dict[str, tuple[int, Record] | None] = {}
        #: Ids created by :meth:`_create` whose entry in ``known`` still holds the record
        #: as given, not as written: :meth:`lookup` makes the written one when asked.
        self._unrevised: set[str] = set()
        #: Rowids reserved for the batch's new records, the next one last.
        self._rowids: list[int] = []
        #: Rows of new plain records (no predecessor, no key: nothing in the store to
        #: meet), held back per table and handed to the dialect together
        #: (:meth:`_release`) instead of one call per row; None while not holding.
        self._held: dict[str, list[tuple[Any, ...]]] | None = None
        #: How many times this transaction has changed each record (by rowid): the
        #: order in which held-back statements of one record must run.
        self._changes: dict[int, int] = {}
        self.lexical = LexicalWrites(d, tx, namespace)

    def flush(self) -> None:
        """Writes what the transaction's changes left pending (the lexical counts)."""
        self._release()
        self.lexical.flush()

    def _release(self) -> None:
        """Hands the held rows to the dialect, in the order their records came: before
        anything that reads what they write, or writes after them."""
        held, self._held = self._held, None
        if not held:
            return
        for table, columns in _HELD:
            rows = held.get(table)
            if rows:
                self.d.insert_rows(self.tx, table, columns, rows, distinct=True)

    # -- reading ----------------------------------------------------------------------

    def prefetch(self, ids: Sequence[str]) -> None:
        wanted = sorted({i for i in ids if i not in self.known})
        self.known.update(dict.fromkeys(wanted))
        for chunk in chunks(wanted, PREFETCH_CHUNK):
            test, params = self.d.in_list("id", chunk)
            rows = self.tx.execute(
                f"SELECT {COLUMNS} FROM records WHERE namespace = ? AND {test}"
                f" ORDER BY id{self.d.lock_for_update}",
                [self.namespace, *params],
            ).fetchall()
            for row in rows:
                self.known[row[2]] = (row[0], record_from_row(row))

    def lookup(self, record_id: str) -> tuple[int, Record] | None:
        if record_id in self._unrevised:  # the record _create wrote, as _upsert_one has it
            self._unrevised.discard(record_id)
            entry = self.known[record_id]
            assert entry is not None
            rowid, given = entry
            written = rules.revision(given, None, "", namespace=self.namespace, now=self.now,
                                     has_predecessor=lambda: False)  # fmt: skip
            self.known[record_id] = (rowid, written)
        if record_id not in self.known:
            self.known[record_id] = fetch(self.d, self.tx, self.namespace, record_id, lock=True)
        return self.known[record_id]

    def require(self, record_id: str) -> tuple[int, Record]:
        found = self.lookup(record_id)
        if found is None:
            raise missing(record_id, self.namespace)
        return found

    # -- rows ---------------------------------------------------------------------------

    def ledger(
        self, op: str, record_id: str, version: int | None, detail: dict[str, Any] | None = None
    ) -> None:
        self._insert(
            "ledger", LEDGER_COLUMNS,
            [(self.now, op, self.namespace, record_id, version, self.actor,
              json.dumps(detail) if detail else None)],
        )  # fmt: skip

    def _insert(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]], change: int = 0
    ) -> None:
        """``insert_rows``, or the rows held (:meth:`_release`) while new plain records'
        rows are (a new record's first change: round 0, as held rows go). Rows that
        never meet (``distinct``): ledger rows have no key but their seq, and a record's
        tag and metadata rows are inserted once a round (each change removes the ones
        before, a round earlier), with its rowid in their key."""
        if self._held is None:
            self.d.insert_rows(self.tx, table, columns, rows, change=change, distinct=True)
        else:
            assert change == 0
            self._held.setdefault(table, []).extend(rows)

    def ensure_namespace(self) -> None:
        self.tx.execute(
            "INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            (self.namespace, self.now),
        )

    def save(
        self,
        rowid: int | None,
        record: Record,
        *,
        document: Document | None = None,
        changed: Sequence[str] | None = None,
    ) -> int:
        """Writes the record's current row, its scope rows and its full-text document,
        keeping the row it replaces in the past. ``document`` is the content's terms
        (:meth:`LexicalWrites.document`): made here for a new record when not given,
        given for an existing one only when its content changed. ``changed``: the only
        fields ``record`` changes of the row as stored (a next version's: this
        transaction read the row, and only this namespace's writes change it), where
        the dialect writes those alone. Returns the rowid."""
        tx, d = self.tx, self.d
        values = row_values(record)
        change = 0 if rowid is None else self._changes.get(rowid, 0)
        columns = changed if NARROW_UPDATES else None
        if (
            rowid is not None
            and document is None
            and d.replace_later(
                tx, self.namespace, rowid, values["updated_at"], values, change, columns
            )
        ):  # what the branch below does, held back with the batch's other rows; a
            # change that leaves tags and metadata had its scope rows kept, revalidated
            return self._saved(rowid, record, values, change, scope=not scope_kept(columns))
        if rowid is not None:  # the version it replaces stays known until now
            outgoing = past.keep(d, tx, self.namespace, rowid, values["updated_at"])
            if document is not None:  # and so do the postings of its content
                self.lexical.keep(rowid, outgoing)
        if rowid is None:
            if document is None:
                document = self.lexical.document(record.content)
            reserved = self._rowids.pop() if self._rowids else None
            rowid = d.insert_record(tx, reserved, values)
            self.lexical.add(rowid, document)
        else:
            d.update_record(tx, rowid, values)
            if document is not None:
                self.lexical.replace(rowid, document)
            for table in ("record_tags", "record_meta"):
                tx.execute(
                    f"DELETE FROM {table} WHERE {d.unindexed('namespace')} = ? AND record = ?",
                    (record.namespace, rowid),
                )
        return self._saved(rowid, record, values, change)

    def _saved(
        self, rowid: int, record: Record, values: dict[str, Any], change: int, *, scope: bool = True
    ) -> int:
        """Adds the rows of the record's new version beside its row (``scope``: its
        tag and metadata rows too)."""
        self._changes[rowid] = change + 1
        self.known[record.id] = (rowid, record)
        if not scope:
            return rowid
        # Scope rows repeat the record's namespace and validity; every change to a
        # record comes through here, so they never disagree with its row.
        tags, meta = scope_rows(record, values, rowid)
        if tags:
            self._insert("record_tags", TAG_COLUMNS, tags, change)
        if meta:
            self._insert("record_meta", META_COLUMNS, meta, change)
        return rowid

    def store_vector(
        self, rowid: int, embedder_id: str, vector: np.ndarray | Sequence[float]
    ) -> None:
        self.d.store_vector(self.tx, self.namespace, rowid, embedder_id, unit(vector))

    # -- upsert -------------------------------------------------------------------------

    def _key_holder(self, key: str, record_id: str) -> str | None:
        """The id of another current, live record holding ``key``, if any. Claims the
        key for this transaction first, so two writers of one key are serialised."""
        self.d.claim_key(self.tx, self.namespace, key)
        test, params = self.d.text_equals("key", key)
        row = self.tx.execute(
            f"SELECT id FROM records WHERE namespace = ? AND {test}"
            " AND id <> ? AND deleted_at IS NULL AND superseded_by IS NULL"
            " AND (valid_to IS NULL OR valid_to > ?) LIMIT 1",
            (self.namespace, *params, record_id, self.now),
        ).fetchone()
        return row[0] if row else None

    def _has_predecessor(self, record_id: str) -> bool:
        row = self.tx.execute(
            "SELECT 1 FROM records WHERE namespace = ? AND superseded_by = ? LIMIT 1",
            (self.namespace, record_id),
        ).fetchone()
        return row is not None

    def _close_superseded(self, new: Record, old_id: str, field: str) -> Record:
        """Closes ``old_id`` at the new record's valid_from and points it at the new one."""
        assert new.valid_from is not None
        found = self.lookup(old_id)
        if found is None:
            raise NotFound(
                f"{field} names {old_id!r}, which does not exist in namespace {self.namespace!r}"
            )
        rowid, old = found
        closed = rules.supersession_closure(old, new, field, self.now)
        if closed is None:
            return old
        self.save(rowid, closed, changed=(*rules.CLOSING, *rules.VERSIONING))
        self.ledger("close", old_id, closed.version, {"superseded_by": new.id})
        return old

    def _upsert_one(self, index: int, incoming: Record, document: Document) -> tuple[str, int]:
        field = f"records[{index}]"
        found = self.lookup(incoming.id)
        rowid, existing = found if found else (None, None)
        record = rules.revision(
            incoming, existing, field, namespace=self.namespace, now=self.now,
            has_predecessor=lambda: self._has_predecessor(incoming.id),
        )  # fmt: skip
        if existing is None and not record.supersedes and record.key is None:
            if self._held is None:  # a new record that reads nothing: its rows wait
                self._held = {}
        else:  # this one reads the store, and its rows follow those before it
            self._release()
        for position, old_id in enumerate(record.supersedes):
            old = self._close_superseded(record, old_id, f"{field}.supersedes[{position}]")
            if position == 0:  # a revision keeps what it does not set of what it revises
                record = inheriting(record, old)
            if record.key is None and old.key is not None:
                record.key = old.key
        if record.key is not None and rules.claims_key(record, self.now):
            holder = self._key_holder(record.key, record.id)
            if holder is not None:
                raise rules.key_conflict(field, record, holder)
        content_changed = existing is not None and existing.content != record.content
        fresh = existing is None or content_changed
        rowid = self.save(rowid, record, document=document if fresh else None)
        if content_changed:  # they were derived from the old text, which the past keeps
            assert existing is not None
            self.d.keep_vectors(self.tx, self.namespace, rowid, existing.content_hash())
            self.d.withdraw_vectors(self.tx, self.namespace, rowid=rowid)
        assert record.version is not None
        self.ledger(rules.write_op(existing, record), record.id, record.version)
        return record.id, record.version

    def upsert(
        self, records: Sequence[Record], embedder_id: str | None, units: np.ndarray | None = None
    ) -> list[tuple[str, int]]:
        """Creates or revises each record in turn (``units``: each one's vector as its
        checked unit row, in order)."""
        self.ensure_namespace()
        self.lexical.language()  # held before any record: one order for every writer
        self.prefetch([r.id for r in records] + [old for r in records for old in r.supersedes])
        new = sum(self.known.get(r.id) is None for r in records)
        if new > 0:  # taken smallest first, after any reserved before
            self._rowids[:0] = sorted(self.d.reserve_rowids(self.tx, new), reverse=True)
        # each content's terms (what LexicalWrites.document makes), the batch's at once
        documents = term_counts_of([r.content for r in records], self.lexical.language())
        known, plain = self.known, PLAIN_BATCH
        written: list[tuple[str, int]] = []
        rowids: list[int] = []  # each record's, in order: where its vector goes
        for i, record in enumerate(records):
            done = None
            if plain and record.key is None and not record.supersedes and not known.get(record.id):
                done = self._create(record, documents[i])
            if done is None:
                done = self._upsert_one(i, record, documents[i])
            written.append(done)
            rowids.append(known[record.id][0])  # type: ignore[index]
        self._release()
        if embedder_id is not None:
            self._given_vectors(records, rowids, embedder_id, units)
        return written

    def _create(self, incoming: Record, document: Document) -> tuple[str, int] | None:
        """What :meth:`_upsert_one` writes of a record that reads nothing of the store
        (nothing stored under its id, no key, supersedes nothing: nearly every write),
        the same rows in the same order (held, with the other such records' rows),
        each row's values made once from the record as given (:func:`created_row`);
        the written record is made only if a later record of the batch asks for it
        (:meth:`lookup`). None, having written nothing: the revision would refuse the
        record, and the general path says why."""
        values = created_row(incoming, self.namespace, self.now)
        if values is None:
            return None
        record_id = values["id"]
        if self._held is None:  # a new record that reads nothing: its rows wait
            self._held = {}
        rowid = self.d.insert_record(self.tx, self._rowids.pop() if self._rowids else None, values)
        self.lexical.add(rowid, document)
        self._changes[rowid] = 1
        tags, meta = scope_rows(incoming, values, rowid)
        if tags:
            self._insert("record_tags", TAG_COLUMNS, tags)
        if meta:
            self._insert("record_meta", META_COLUMNS, meta)
        self.known[record_id] = (rowid, incoming)
        self._unrevised.add(record_id)
        self.ledger("create", record_id, 1)
        return record_id, 1

    def _given_vectors(
        self,
        records: Sequence[Record],
        rowids: list[int],
        embedder_id: str,
        units: np.ndarray | None,
    ) -> None:
        """Stores the vectors the batch's records came with, once all their rows are
        written (``units``: every record's, already checked, at unit length, in
        order; else each record's own, if it has one). The vectors a changed content
        was derived from were withdrawn while its record was written, before these."""
        if units is not None:
            self.d.store_units(self.tx, self.namespace, rowids, embedder_id, units)
            return
        for rowid, record in zip(rowids, records, strict=True):
            if record.vector is not None:
                self.store_vector(rowid, embedder_id, record.vector)

    # -- changes of one record ------------------------------------------------------------

    def change(
        self,
        rowid: int,
        record: Record,
        update: dict[str, Any],
        *,
        op: str,
        detail: dict[str, Any] | None = None,
    ) -> int:
        """Writes a new version of ``record`` with ``update`` applied (its content,
        and so its full-text document, unchanged)."""
        changed = rules.next_version(record, update, self.now)
        version = changed.version or 0
        self.save(rowid, changed, changed=(*update, *rules.VERSIONING))
        self.ledger(op, record.id, version, detail)
        return version

    def invalidate(self, record_id: str, at: int) -> int:
        rowid, record = self.require(record_id)
        update = rules.invalidation(record, at)
        if update is None:
            return record.version or 0  # already not valid at `at`: never extend validity
        return self.change(rowid, record, update, op="invalidate")

    def soft_delete(self, record_id: str) -> int:
        rowid, record = self.require(record_id)
        if record.deleted_at is not None:
            return record.version or 0  # already tombstoned: nothing to change
        return self.change(rowid, record, {"deleted_at": from_us(self.now)}, op="delete")

    def hard_delete(self, record_id: str) -> None:
        """Removes every trace of the record: row, full-text document, and (by cascade)
        its past versions, tags, metadata, vectors and the extraction marker; its mentions and
        the graph edges only it evidences (:func:`erstwhile.store.sql.graph.forget`). The
        ledger keeps that a hard delete of this id happened, and nothing of its content."""
        self.lexical.language()  # held before the record, as an upsert holds them
        rowid, _ = self.require(record_id)
        graph.forget(self.tx, self.namespace, record_id, rowid)
        self.lexical.remove(rowid)
        self.d.forget_record(self.tx, self.namespace, rowid)
        self.tx.execute(
            "DELETE FROM records WHERE namespace = ? AND rowid = ?", (self.namespace, rowid)
        )
        self.known[record_id] = None
        self.ledger("hard_delete", record_id, None)

    def restore(self, versions: Sequence[Record]) -> None:
        """Writes one record's versions as an export holds them, server fields and all
        (``erstwhile import`` of an export): each version saved in turn, so the current
        row is the last one, and each ledgered as an ``import``."""
        self.ensure_namespace()
        rowid: int | None = None
        previous: Record | None = None
        for record in versions:
            changed = previous is None or previous.content != record.content
            document = self.lexical.document(record.content) if changed else None
            rowid = self.save(rowid, record, document=document)
            self.ledger("import", record.id, record.version)
            previous = record

    def restore_hard_delete(self, record_id: str) -> None:
        """Ledgers, on import, that ``record_id`` was hard-deleted in the exported store."""
        self.ensure_namespace()
        self.ledger("hard_delete", record_id, None, {"imported": True})

    def verify(self, record_id: str, reviewer: str) -> int:
        rowid, record = self.require(record_id)
        if record.trust == "verified":
            return record.version or 0
        return self.change(rowid, record, {"trust": "verified"}, op="verify",
                           detail={"reviewer": reviewer})  # fmt: skip

    def set_embedding(self, record_id: str, embedder_id: str, vector: np.ndarray) -> None:
        rowid, record = self.require(record_id)
        self.store_vector(rowid, embedder_id, vector)
        self.d.vectors_alone(self.tx, [rowid])  # its row stays as it is
        self.ledger("set_embedding", record_id, record.version, {"embedder_id": embedder_id})

"""``scope_log``: the one change feed of a SQLite file's in-process copies.

Every change to what a copy holds appends the rowid of the record it concerns:
the insert of a record's row (``SqliteDialect.insert_record``, a batch's in one
statement), a trigger on every update and delete of it, and a write of vector rows
that changes no record row (``SqliteDialect.vectors_alone``, called for the embed
job's vectors and ``set_embedding``; ``withdraw_vectors`` for a namespace's
withdrawal). A vector written with its record's row is logged by that row's entry.
``seq`` is max + 1, so
the entries are in commit order (one writer at a time) and have no gaps but those
pruning leaves at the front.

Its readers each keep the seq they have read up to, in memory (a saved vector copy
keeps it with its commit point, ``vector_copies.seq``): the vector matrix
(:mod:`erstwhile.store.sqlite.vectors`), the scope copy
(:mod:`erstwhile.store.sqlite.scope_cache`) and the past-vector copy
(:mod:`erstwhile.store.sqlite.past_vectors`). A reader reads the records logged past
its seq and takes each one's state now from its tables; one whose next entry was
pruned loads itself whole.
"""

from __future__ import annotations

import sqlite3
from typing import Any

#: ``scope_log`` keeps at least its newest this many entries, or one per record if the
#: store holds more (:func:`prune_log`).
LOG_KEEP = 100_000


def prune_log(tx: Any, keep: int | None = None) -> int:
    """Removes ``scope_log``'s entries older than its newest ``keep`` (by default
    :data:`LOG_KEEP`, or one per record if more), within ``tx`` (a write's: each lexical
    merge's, ``lexical_merge._move``); how many. Its newest entry always stays, so ``seq``
    (max + 1) never goes back. A copy that has not read the entries removed is about as
    many changes behind as it holds rows, so it would load itself whole anyway; it learns
    that it must from :func:`changes_since` (the entry after its own is gone)."""
    (top, records) = tx.execute(
        "SELECT (SELECT max(seq) FROM scope_log), (SELECT max(rowid) FROM records)"
    ).fetchone()
    if top is None:
        return 0
    floor = int(top) - (max(LOG_KEEP, int(records or 0)) if keep is None else max(keep, 1))
    return int(tx.execute("DELETE FROM scope_log WHERE seq <= ?", (floor,)).rowcount)


def changes_since(conn: sqlite3.Connection, seq: int) -> tuple[int, int | None, bool]:
    """``scope_log``'s entries after ``seq``, as a copy that has read up to it sees them:
    how many, the last one's seq, and whether some it has not read were pruned
    (:func:`prune_log`: the copy must load itself whole). ``seq`` < 0: none read."""
    changes, top, first = conn.execute(
        "SELECT count(*), max(seq), min(seq) FROM scope_log WHERE seq > ?", (seq,)
    ).fetchone()
    return int(changes), top, seq >= 0 and first is not None and first > seq + 1


def records_since(conn: sqlite3.Connection, seq: int) -> list[int]:
    """The records logged after ``seq``, each once."""
    return [row[0] for row in conn.execute(
        "SELECT DISTINCT record FROM scope_log WHERE seq > ?", (seq,))]  # fmt: skip


__all__ = ["LOG_KEEP", "changes_since", "prune_log", "records_since"]

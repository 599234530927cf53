"""Merges of SQLite's lexical tail (:data:`erstwhile.store.sql.lexical.TAIL`) into
:data:`~erstwhile.store.sql.lexical.MAIN`: when one is due, one made beside the writers
(:func:`merge_beside`, from the dialect's merge thread) and one made inside a write
(:func:`merge_tail`). The documents are split and counted in SQLite's SQL (temporary
tables, ``json_each``), so this is SQLite's alone.

The tail's bound (:data:`TAIL_ROWS`, :data:`TAIL_MAX`) can be lowered for a test by
``ERSTWHILE_TEST_TAIL_ROWS`` (both bounds, read at import), so a fault test's child
process reaches a merge within a few dozen records; nothing else reads it.
"""

from __future__ import annotations

import os
import sqlite3
from itertools import pairwise
from typing import Any, cast

from erstwhile.store.sql.dialect import Dialect, Tx, WriterBeside
from erstwhile.store.sql.lexical import (
    DOCUMENTS,
    MAIN,
    PENDING,
    POSTING_COLUMNS,
    SEGMENTS,
    TAIL,
    TAIL_ENDS,
    split_terms,
)
from erstwhile.store.sqlite import change_log

#: The tail is due to be merged at this many rows, or more in a large store
#: (:func:`merge_due`), and at most :data:`TAIL_MAX`; a write merges it itself at twice
#: what is due.
TAIL_ROWS = 8_000
TAIL_MAX = 40_000
_TEST_TAIL_ROWS = os.environ.get("ERSTWHILE_TEST_TAIL_ROWS")
if _TEST_TAIL_ROWS:  # a test's bound (the module's docstring), never a product setting
    TAIL_ROWS = TAIL_MAX = int(_TEST_TAIL_ROWS)


def merge_due(rows: int, tx: Tx, *, over: int = 1) -> bool:
    """Whether the tail, of ``rows`` rows, is due to be merged (``over``: whether it
    holds that many times what is due).

    A search seeks each query term once per merge of its namespace where the postings
    are keyed by merge (else a merge rewrites pages of :data:`MAIN` in proportion to
    its size), while a search's first copy of the tail reads all of it. So the bound
    on the tail's rows grows as ``sqrt(TAIL_ROWS * merged / 4)`` (8,000 up to
    32,000 merged records; ~14,000 at 100k records), up to :data:`TAIL_MAX` (from 800k
    records on), the merged documents estimated by every namespace's records less the
    tail's rows: 10 merges in the first 100k records written, 41 in the first 1M. When
    to merge never changes what a search finds."""
    if rows < TAIL_ROWS * over:
        return False
    if rows >= TAIL_MAX * over:
        return True
    (documents,) = tx.execute("SELECT coalesce(sum(documents), 0) FROM lexical_stats").fetchone()
    merged = max(int(documents) - rows, 0)
    return rows * rows * 4 >= TAIL_ROWS * merged * over * over


def merge_beside(d: Dialect) -> None:
    """A merge beside the writers (``Tail.merge`` asked for it after a write found the
    tail due), made in steps so that the writers wait for none of them, or little:

    1. the postings of the tail's documents are made in a read transaction, in a
       temporary table of the thread's connection (:func:`_prepare`: one statement that
       SQLite runs without Python's lock, and without the write lock, beside the
       writers);
    2. the merge claims its segment (:data:`PENDING`), and copies the postings into
       :data:`MAIN` about :data:`MOVE_CHUNK` at a time, each copy one statement of its
       own (``Database.write_one``) begun as a write commits, so it runs while the
       writer makes its next batch: no search sees them (a search finds a segment's
       postings once it is listed in :data:`SEGMENTS`);
    3. a write transaction lists the segment, counts its terms and removes the tail's
       rows it holds (:func:`_move`).

    Documents written meanwhile stay in the tail, and a record written or removed
    since the postings were made has none copied after (a copy leaves out the records
    with a tail row past the merge's) and none kept (the rewrite or removal removes
    those copied before, as it removes its listed postings: ``LexicalWrites._take``).
    If another merge came first (another process's, or a write's that found the tail
    twice due), this one is given up, its postings removed with its claim by whichever
    merge is listed next. The process's copy of the tail is cleared once the segment
    is listed."""
    db = cast(WriterBeside, d.db)
    try:
        with db.snapshot() as tx:
            (first, last) = tx.execute(TAIL_ENDS).fetchone()
            if first is None or not merge_due(int(last) - int(first) + 1, tx):
                return
            first, last = int(first), int(last)
            _prepare(tx, last)
            bounds = tx.execute(_CHUNKS, (MOVE_CHUNK, MOVE_CHUNK)).fetchall()
            spaces = tx.execute(f"SELECT count(DISTINCT namespace) FROM {_COUNTS}").fetchone()[0]
        if spaces and not _claim(db, first, last, spaces):
            return
        edges: list[tuple[str, str] | None] = [None, *bounds, None]
        for low, high in pairwise(edges) if spaces else ():
            db.next_commit(MOVE_WAIT_S)
            db.write_one(*_copy(last, low, high))
        db.write(lambda tx: _move(d, tx, first, last, copied=True))
    finally:
        with db.read() as conn:
            _drop(conn)


def _claim(db: WriterBeside, first: int, last: int, spaces: int) -> bool:
    """Lists the merge's segment ``last`` in :data:`PENDING` for each of its
    namespaces, if the tail still starts at ``first`` (no merge came since) and no
    other merge claimed it; whether it did."""
    try:
        claimed = db.write_one(
            f"INSERT INTO {PENDING} (namespace, seg) SELECT DISTINCT namespace, ?"
            f" FROM {_COUNTS} WHERE (SELECT min(seq) FROM {TAIL}) = ?",
            (last, first),
        )
    except sqlite3.IntegrityError:  # another process's merge of the same rows
        return False
    return claimed == spaces


def _copy(
    last: int, low: tuple[str, str] | None, high: tuple[str, str] | None
) -> tuple[str, list[Any]]:
    """The statement copying the postings of :data:`_MERGING` from term ``low`` up to
    ``high`` (None: from the first, to the last) into :data:`MAIN` as segment
    ``last``: none of a record with a tail row past ``last`` (written or removed
    since they were made), none once the claim is gone (another merge came)."""
    where: list[str] = []
    params: list[Any] = [last, last, last]
    if low is not None:
        where.append("(namespace, term) >= (?, ?)")
        params += low
    if high is not None:
        where.append("(namespace, term) < (?, ?)")
        params += high
    return (
        f"INSERT INTO {MAIN} (seg, {', '.join(POSTING_COLUMNS)})"
        f" SELECT ?, {', '.join(POSTING_COLUMNS)} FROM {_MERGING}"
        f" WHERE record NOT IN (SELECT record FROM {TAIL} WHERE seq > ?)"
        f" AND EXISTS (SELECT 1 FROM {PENDING} WHERE seg = ?)"
        + "".join(f" AND {test}" for test in where),
        params,
    )


def merge_tail(d: Dialect, tx: Tx) -> None:
    """Moves every document of the tail (of every namespace) into :data:`MAIN` within
    ``tx`` (a write's: the tail it finds twice due, or a re-index's) and empties the
    tail."""
    (first, last) = tx.execute(TAIL_ENDS).fetchone()
    if first is None:
        return
    _prepare(tx, int(last))
    _move(d, tx, int(first), int(last))
    _drop(tx)


#: The postings a merge moves, made before it takes the write lock: a temporary table
#: (the connection's own, in memory: ``connection.connect``), in the order of
#: :data:`MAIN`'s key, so the move inserts each page's postings beside the last.
_MERGING = "temp.lexical_merging"
#: Each term's count among them, made with them.
_COUNTS = "temp.lexical_merging_counts"
#: The records whose tail rows they were made of.
_RECORDS = "temp.lexical_merging_records"

#: Postings a merge beside the writers copies into :data:`MAIN` in one statement
#: (:func:`merge_beside`): ~12 ms beside a writer at 100k records, which a writer's
#: time between two batches mostly covers.
MOVE_CHUNK = 25_000
#: Seconds a copy waits for a write to commit before it goes on regardless.
MOVE_WAIT_S = 0.02
#: Where the postings of :data:`_MERGING` are cut into copies of about
#: :data:`MOVE_CHUNK` (each term's postings in one): the ``(namespace, term)`` after
#: which each copy's running count crosses a multiple of it.
_CHUNKS = (
    "SELECT namespace, term FROM (SELECT namespace, term, df, sum(df) OVER"
    " (ORDER BY namespace, term ROWS UNBOUNDED PRECEDING) AS upto"
    f" FROM {_COUNTS}) WHERE upto / ? <> (upto - df) / ?"
)


def _drop(tx: Tx) -> None:
    for table in (_MERGING, _COUNTS, _RECORDS):
        tx.execute(f"DROP TABLE IF EXISTS {table}")


def _prepare(tx: Tx, last: int) -> None:
    """Fills :data:`_MERGING` with the postings of the documents of the tail's records
    whose rows it holds up to seq ``last``, each document as ``tx`` sees it (none once
    its record is gone). The documents are split and counted in SQL: a document's terms
    (``lexical.packed``) are runs of letters and digits joined by single spaces, so quoting
    each and joining them with commas makes a JSON array of them, which ``json_each``
    lists (:func:`split_terms`); a record's term met again adds one to its posting's tf
    (the table's key orders them: no sort of its own, 1.6x faster than a GROUP BY);
    and each term's count of them (:data:`_COUNTS`); and the records they are of
    (:data:`_RECORDS`), by which the move finds those written since in a few lookups."""
    _drop(tx)
    tx.execute(f"CREATE TABLE {_RECORDS} (record INTEGER PRIMARY KEY)")
    tx.execute(f"INSERT INTO {_RECORDS} SELECT DISTINCT record FROM {TAIL} WHERE seq <= ?", (last,))
    tx.execute(
        f"CREATE TABLE {_MERGING} (namespace TEXT NOT NULL, term TEXT NOT NULL,"
        " record INTEGER NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL,"
        " PRIMARY KEY (namespace, term, record)) WITHOUT ROWID"
    )
    tx.execute(
        f"INSERT INTO {_MERGING} (namespace, term, record, tf, length)"
        " SELECT x.namespace, j.value, x.record, 1, x.length"
        f" FROM {_RECORDS} t"
        f" JOIN {DOCUMENTS} x ON x.record = t.record, {split_terms('x.terms')} j"
        " WHERE x.terms <> ''"
        " ON CONFLICT (namespace, term, record) DO UPDATE SET tf = tf + 1"
    )
    _count(tx)


def _count(tx: Tx) -> None:
    """(Re)makes :data:`_COUNTS`: each term's number of documents in :data:`_MERGING`
    (read in its key's order: no sort)."""
    tx.execute(f"DROP TABLE IF EXISTS {_COUNTS}")
    tx.execute(
        f"CREATE TABLE {_COUNTS} AS SELECT namespace, term, count(*) AS df"
        f" FROM {_MERGING} GROUP BY namespace, term"
    )


def _move(d: Dialect, tx: Tx, first: int, last: int, *, copied: bool = False) -> None:
    """Moves :data:`_MERGING` (made of the tail's rows ``first``..``last``) into
    :data:`MAIN` as segment ``last`` (``copied``: already copied there, unlisted:
    :func:`merge_beside`), the documents' counts into ``lexical_terms``, and removes
    those tail rows; nothing if the tail no longer starts at ``first`` (a merge came
    since). A record with a later tail row (written or removed since) is left out:
    its document is the tail's still (its postings dropped, and the counts made again
    without it). Every other merge's claim (:data:`PENDING`) goes, with what it copied:
    it began at the same tail, and can no longer be listed."""
    (now_first,) = tx.execute(f"SELECT min(seq) FROM {TAIL}").fetchone()
    if now_first != first:
        return
    # records with a tail row up to last (in the postings made) and one after it: the
    # few rows after last, each looked up among the merge's records (the rows up to
    # last are as the postings were made of them: only a merge removes tail rows)
    changed = (
        f"SELECT t.record FROM {TAIL} t JOIN {_RECORDS} m ON m.record = t.record WHERE t.seq > ?"
    )
    if tx.execute(f"SELECT EXISTS ({changed})", (last,)).fetchone()[0]:
        # (copied: none of theirs is left there; a copy leaves them out once they
        # change, and the change removed those copied before, LexicalWrites._take)
        tx.execute(f"DELETE FROM {_MERGING} WHERE record IN ({changed})", (last,))
        _count(tx)
    # every other merge's claim goes first: one that died having copied under this
    # very segment (the same tail rows, none written since) would collide with it
    _forget_claims(tx, last if copied else None)
    tx.execute(
        "INSERT INTO lexical_terms (namespace, term, df)"
        f" SELECT namespace, term, df FROM {_COUNTS} WHERE true"
        " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df"
    )
    # appended at the key's end, a segment of this merge's own (a dialect that keeps a
    # tail keys its postings by merge: SQLite)
    assert d.lexical_segments
    tx.execute(
        f"INSERT INTO {SEGMENTS} (namespace, seg) SELECT DISTINCT namespace, ? FROM {_COUNTS}",
        (last,),
    )
    if not copied:
        tx.execute(
            f"INSERT INTO {MAIN} (seg, {', '.join(POSTING_COLUMNS)})"
            f" SELECT ?, {', '.join(POSTING_COLUMNS)} FROM {_MERGING}",
            (last,),
        )
    tx.execute(f"DELETE FROM {TAIL} WHERE seq <= ?", (last,))
    change_log.prune_log(tx)  # the change feed's upkeep, at the same moment
    tail = d.lexical_tail
    if tail is not None and tail.on_commit is not None:
        tail.on_commit(tail.merged)


def _forget_claims(tx: Tx, own: int | None) -> None:
    """Removes every claim of :data:`PENDING` and the postings copied for it, but for
    the merge's ``own`` segment in the namespaces it lists (None: it copied none). A
    merge beside the writers claims its segment only where none is claimed
    (:func:`_claim`), so a claim of ``own`` is its own; a merge inside a write copied
    nothing, and a dead merge's claim of the same segment goes with its postings
    before the move inserts them."""
    claims = tx.execute(
        f"SELECT namespace, seg FROM {PENDING} WHERE seg IS NOT ?"
        f" OR namespace NOT IN (SELECT namespace FROM {_COUNTS})",
        (own,),
    )
    for namespace, seg in claims.fetchall():
        tx.execute(f"DELETE FROM {MAIN} WHERE namespace = ? AND seg = ?", (namespace, seg))
    tx.execute(f"DELETE FROM {PENDING}")

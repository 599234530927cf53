"""The SQLite dialect: one file, WAL, and an in-process matrix of the vectors
(refreshed from the ``vectors`` table) for the vector lane. The lexical lane is the
shared one (:mod:`erstwhile.store.sql.lexical`), with a tail of documents not merged
yet, which a search scores from an in-process copy (``lexical_tail``) and a thread
beside the writers merges once it is due (:class:`Merger`).

A write transaction holds the file's write lock from its first statement
(``BEGIN IMMEDIATE``), so rows need no locks of their own and a key needs no claim.
"""

from __future__ import annotations

import json
import sqlite3
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import Window, now_us
from erstwhile.store.base import SemanticHits
from erstwhile.store.sql.dialect import Dialect, Lane
from erstwhile.store.sql.maintenance import Finding
from erstwhile.store.sql.past import KEEP_ROW, keep_scope, known_rows
from erstwhile.store.sql.rows import COLUMNS, ROW_FIELDS, best, hits, scope_kept
from erstwhile.store.sql.scope import known_scope, scope_rowids
from erstwhile.store.sql.scoring import rescored, top_k
from erstwhile.store.sqlite import lexical_merge
from erstwhile.store.sqlite.connection import Background, Database, Transaction, translated
from erstwhile.store.sqlite.lexical_tail import Tail
from erstwhile.store.sqlite.migrations import apply_migrations
from erstwhile.store.sqlite.past_vectors import PastVectors
from erstwhile.store.sqlite.scope_cache import ScopeCache
from erstwhile.store.sqlite.vector_file import erase
from erstwhile.store.sqlite.vectors import VectorCache

_INSERT = (
    f"INSERT INTO records ({', '.join(ROW_FIELDS)}) "
    f"VALUES ({', '.join(':' + name for name in ROW_FIELDS)})"
)
# with a rowid drawn ahead (reserve_rowids): held back, a batch's rows in one executemany
_INSERT_AT = (
    f"INSERT INTO records (rowid, {', '.join(ROW_FIELDS)}) "
    f"VALUES (?, {', '.join('?' for _ in ROW_FIELDS)})"
)
#: A new record's rowid appended to the change sequence (migration m013: its insert
#: trigger's work, done here, a batch's rows in one executemany).
_LOG_INSERT = "INSERT INTO scope_log (record) VALUES (?)"
_LOG_MANY = ("INSERT INTO scope_log (record) VALUES", 1, "")
_UPDATE = (
    f"UPDATE records SET {', '.join(f'{name} = :{name}' for name in ROW_FIELDS)} "
    "WHERE rowid = :rowid"
)
_STORE_VECTOR = (
    "INSERT INTO vectors (record, embedder_id, dimensions, vector) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (record, embedder_id) DO UPDATE SET"
    " dimensions = excluded.dimensions, vector = excluded.vector"
)
# A batch's vectors in one statement: row i of the packed rows (?4, ?5 bytes each) goes
# to the i-th rowid of the JSON list ?1. One step of SQLite instead of a bound row per
# vector (a tenth of a batch's writing).
# (``WHERE true``: an upsert's SELECT needs a WHERE for SQLite to parse its ON CONFLICT.)
_STORE_UNITS = (
    "INSERT INTO vectors (record, embedder_id, dimensions, vector)"
    " SELECT j.value, ?2, ?3, substr(?4, j.key * ?5 + 1, ?5) FROM json_each(?1) AS j WHERE true"
    " ON CONFLICT (record, embedder_id) DO UPDATE SET"
    " dimensions = excluded.dimensions, vector = excluded.vector"
)
_NEWEST_PAST = "(SELECT max(rowid) FROM record_past WHERE record = ?)"
_DELETE_SCOPE = tuple(
    f"DELETE FROM {table} WHERE +namespace = ? AND record = ?"
    for table in ("record_tags", "record_meta")
)
_REVALIDATE_SCOPE = tuple(
    f"UPDATE {table} SET valid_from = ?, valid_to = ?, deleted_at = ?"
    " WHERE +namespace = ? AND record = ?"
    for table in ("record_tags", "record_meta")
)
#: A row's values (``row_values``) in the order of ``ROW_FIELDS``.
_ROW = itemgetter(*ROW_FIELDS)


@cache
def _update_of(columns: tuple[str, ...]) -> str:
    """The rewrite of a records row's ``columns`` alone (names of ``ROW_FIELDS``)."""
    assert set(columns) <= set(ROW_FIELDS)
    return f"UPDATE records SET {', '.join(f'{name} = ?' for name in columns)} WHERE rowid = ?"


#: The rewrite of a whole records row, its values in the order of ``ROW_FIELDS``.
_UPDATE_AT = _update_of(ROW_FIELDS)


class Merger(Background):
    """Merges the tail (:func:`lexical_merge.merge_beside`) from a thread of its own once a
    write has found it due, so no write waits for a merge while the store has a moment
    between writes; one that finds the tail twice due (no such moment came) merges it
    itself. The merge's postings are made in a read transaction; moving them into the
    postings table takes the process's write lock like any write."""

    name = "erstwhile-merge"

    def __init__(self, dialect: SqliteDialect) -> None:
        super().__init__()
        # weak: a store dropped unclosed is not kept alive by its thread
        self._dialect = weakref.ref(dialect)

    @contextmanager
    def session(self) -> Iterator[Callable[[], bool | None]]:
        def merge() -> None:
            d = self._dialect()
            if d is not None:
                lexical_merge.merge_beside(d)

        yield merge


@cache
def _insert(table: str, columns: tuple[str, ...], suffix: str) -> tuple[str, tuple[str, int, str]]:
    """The statement inserting one row, and its parts for many rows a statement
    (``connection.Deferred.many``)."""
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES"
    values = ", ".join("?" for _ in columns)
    return f"{head} ({values}){suffix}", (head, len(columns), suffix)


class SqliteDialect(Dialect):
    """What the SQLite store does its own way."""

    name = "sqlite"
    # 2 workers, 8 clients, 100k records: 442 semantic searches/s at 4.3 ms of CPU
    # each with one request at a time per worker, 297/s at 6.0 ms with 40 (docs/server.md)
    request_threads = 1
    true = "1"
    membership = "in"
    lexical_segments = True  # m015: each merge appends its postings (sql.lexical.postings_of)

    def __init__(self, path: str) -> None:
        self.path = path
        self.db: Database = Database(path)
        self._vectors = VectorCache(path)
        self._scopes = ScopeCache()
        self._past = PastVectors()
        self.merger = Merger(self)
        weakref.finalize(self, self.merger.stop, wait=False)
        self.lexical_tail = Tail(self.db.writing, self.db.on_commit, self.merger.ask)
        with translated(path):
            apply_migrations(self.db.conn(), now_us())

    # -- wording ------------------------------------------------------------------

    def unindexed(self, column: str) -> str:
        return f"+{column}"

    def by_index(self, table: str, index: str) -> str:
        return f"{table} INDEXED BY {index}"

    def records_join(
        self,
        alias: str,
        driver: str,
        *,
        table: str = "records",
        column: str = "rowid",
        index: str | None = None,
    ) -> str:
        # CROSS JOIN fixes the order: the scope rows drive, each record read by rowid
        # (by the named index: the planner would rather range over the namespace)
        indexed = f" INDEXED BY {index}" if index else ""
        return f"CROSS JOIN {table} {alias}{indexed} ON {alias}.{column} = {driver}.record"

    def has_vector(self, vectors: str, records: str) -> str:
        # a withdrawn vector stays as a row with no dimensions (see withdraw_vectors)
        return (
            f"{vectors}.record = {records}.rowid AND {vectors}.embedder_id = ?"
            f" AND {vectors}.dimensions > 0"
        )

    # -- writes ---------------------------------------------------------------------

    def reserve_rowids(self, tx: Transaction, count: int) -> list[int]:
        # Inside BEGIN IMMEDIATE no other writer can draw them; records is
        # AUTOINCREMENT, so a rowid is past both the highest ever used and any left.
        (last,) = tx.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'records'), 0),"
            " coalesce((SELECT max(rowid) FROM records), 0))"
        ).fetchone()
        return list(range(int(last) + 1, int(last) + 1 + count))

    def insert_rows(
        self, tx: Transaction, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
        suffix: str = "", *, change: int = 0, distinct: bool = False,
    ) -> None:  # fmt: skip
        # held back; executemany runs them one by one, so a row meets an earlier one's
        # conflict as a statement of its own would; distinct rows go many to a statement
        sql, many = _insert(table, tuple(columns), suffix)
        tx.defer(sql, rows, round=2 * change + 1, many=many if distinct else None)

    def insert_record(self, tx: Transaction, rowid: int | None, values: dict[str, Any]) -> int:
        if rowid is None:
            rowid = int(tx.execute(_INSERT, values).lastrowid or 0)
            tx.execute(_LOG_INSERT, (rowid,))
            return rowid
        tx.defer(_INSERT_AT, [(rowid, *_ROW(values))])
        # sent after the records rows of its round, many to a statement (no key to meet)
        tx.defer(_LOG_INSERT, [(rowid,)], many=_LOG_MANY)
        return rowid

    def update_record(self, tx: sqlite3.Connection, rowid: int, values: dict[str, Any]) -> None:
        tx.execute(_UPDATE, {**values, "rowid": rowid})

    def replace_later(
        self, tx: Transaction, namespace: str, rowid: int, known_to: int,
        values: dict[str, Any], change: int, columns: Sequence[str] | None = None,
    ) -> bool:  # fmt: skip
        # In the round before the rows of this change (Transaction): after those of
        # the record's earlier changes in this transaction. One statement after the
        # other, each for every record that waits: each record's past copy precedes
        # its scope rows' copies (which point at its newest past row) and its rewrite.
        key = (namespace, rowid)
        tags, meta = keep_scope(self, _NEWEST_PAST)
        round = 2 * change
        tx.defer(KEEP_ROW, [(known_to, *key)], round=round)
        tx.defer(tags, [(rowid, *key)], round=round)
        tx.defer(meta, [(rowid, *key)], round=round)
        if columns is None:
            tx.defer(_UPDATE_AT, [(*_ROW(values), rowid)], round=round)
        else:  # SQLite rewrites the index entries of every column set, changed or not
            names = tuple(sorted(columns))
            tx.defer(_update_of(names), [(*[values[n] for n in names], rowid)], round=round)
        if scope_kept(columns):  # the same rows, their validity rewritten in place
            validity = (values["valid_from"], values["valid_to"], values["deleted_at"])
            for statement in _REVALIDATE_SCOPE:
                tx.defer(statement, [(*validity, *key)], round=round)
        else:  # removed, and the caller inserts the new version's
            for statement in _DELETE_SCOPE:
                tx.defer(statement, [key], round=round)
        return True

    def forget_record(self, tx: Transaction, namespace: str, rowid: int) -> None:
        # its vectors leave every saved copy before the delete returns (vector_file)
        erase(tx, self._vectors.folder, rowid)

    def keep_vectors(
        self, tx: sqlite3.Connection, namespace: str, rowid: int, content_hash: str
    ) -> None:
        tx.execute(
            "INSERT INTO past_vectors (record, content_hash, embedder_id, dimensions, vector)"
            " SELECT record, ?, embedder_id, dimensions, vector FROM vectors"
            " WHERE record = ? AND dimensions > 0 ON CONFLICT (record, content_hash,"
            " embedder_id) DO UPDATE SET dimensions = excluded.dimensions,"
            " vector = excluded.vector",
            (content_hash, rowid),
        )

    def store_vector(
        self, tx: Transaction, namespace: str, rowid: int, embedder_id: str,
        unit: np.ndarray,
    ) -> None:  # fmt: skip
        row = (rowid, embedder_id, int(unit.shape[0]), unit.astype("<f4").tobytes())
        tx.defer(_STORE_VECTOR, [row])

    def store_units(
        self, tx: Transaction, namespace: str, rowids: Sequence[int], embedder_id: str,
        units: np.ndarray,
    ) -> None:  # fmt: skip
        if len(rowids) != len(units):  # the statement would store short vectors
            raise ValueError(f"{len(rowids)} rowids for {len(units)} vectors")
        if not rowids:
            return
        packed = np.ascontiguousarray(units, dtype="<f4")
        width = packed.shape[1]
        tx.execute(_STORE_UNITS, (json.dumps(list(rowids)), embedder_id, width,
                                  packed.tobytes(), 4 * width))  # fmt: skip

    def vectors_alone(self, tx: Transaction, rowids: Sequence[int]) -> None:
        tx.defer(_LOG_INSERT, [(rowid,) for rowid in rowids], many=_LOG_MANY)

    def withdraw_vectors(
        self, tx: sqlite3.Connection, namespace: str, *, rowid: int | None = None,
        embedder_id: str | None = None,
    ) -> int:  # fmt: skip
        """Marks vectors as gone (no dimensions, no data); every process's vector cache
        drops them on refresh: a record's own are withdrawn with a change of its row,
        which is logged, and a namespace's are logged here."""
        params: list[Any]
        if rowid is not None:
            where, params = "record = ?", [rowid]
        else:
            where = "embedder_id = ? AND record IN (SELECT rowid FROM records WHERE namespace = ?)"
            params = [embedder_id, namespace]
            tx.execute(
                f"INSERT INTO scope_log (record) SELECT record FROM vectors"
                f" WHERE dimensions > 0 AND {where}",
                params,
            )
        cursor = tx.execute(
            f"UPDATE vectors SET dimensions = 0, vector = x'' WHERE dimensions > 0 AND {where}",
            params,
        )
        return cursor.rowcount

    # -- lanes ----------------------------------------------------------------------

    def _semantic_known(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int]:
        """Exact cosine over the records as known at ``lane.known_at``: a version whose
        content is the record's content now uses the current vector (the in-process
        matrix); one whose content has changed since uses the vector kept for it (the
        in-process copy of ``past_vectors``, :mod:`erstwhile.store.sqlite.past_vectors`)."""
        assert lane.known_at is not None
        current, replaced = known_scope(
            self, "r", lane.namespace, lane.request, lane.window, lane.known_at
        )
        query = query.astype(np.float32)
        with self.db.snapshot() as conn:
            cached = self._scopes.rowids(
                conn, lane.namespace, lane.request, lane.window, lane.known_at
            )
            if cached is None:
                (listed,) = conn.execute(  # one text value, as in in_scope
                    f"SELECT group_concat(r.rowid) FROM records r WHERE {current.where}",
                    current.params,
                ).fetchone()
                cached = np.fromstring(listed or "", dtype=np.int64, sep=",")
            past: list[int] = []
            old: list[tuple[int, str]] = []
            for record, same, content_hash in conn.execute(
                "SELECT r.record, r.content_hash = c.content_hash, r.content_hash"
                f" FROM record_past r JOIN records c ON c.rowid = r.record WHERE {replaced.where}",
                replaced.params,
            ):  # fmt: skip
                if same:
                    past.append(record)
                else:
                    old.append((record, content_hash))
            in_scope = np.concatenate([cached, np.asarray(past, dtype=np.int64)])
            total = int(in_scope.shape[0]) + len(old)
            rowids, similarities = np.zeros(0, np.int64), np.zeros(0, np.float32)
            if in_scope.shape[0]:
                matrix = self._vectors.refresh(conn, embedder_id, int(query.shape[0]))
                view = self._vectors.view(matrix)
                rowids, positions = view.locate(in_scope)
                if rowids.shape[0]:
                    similarities = view.scores_at(positions, query)
                    # the best, scored again row by row (ties by id: scoring.rescored)
                    chosen = top_k(similarities, lane.limit)
                    rowids, positions = rowids[chosen], positions[chosen]
                    similarities = rescored(view.rows[positions], query)
            kept = self._past.scores(conn, embedder_id, query, dict(old))
            if kept:
                rowids = np.concatenate([rowids, np.fromiter(kept, np.int64, len(kept))])
                similarities = np.concatenate(
                    [similarities, np.fromiter(kept.values(), np.float32, len(kept))]
                )
            scored = int(rowids.shape[0])
            if not scored:
                return [], total
            chosen = top_k(similarities, lane.limit)
            by_rowid = {int(rowids[i]): float(similarities[i]) for i in chosen}
            rows = known_rows(self, conn, lane.namespace, lane.known_at, list(by_rowid))
        found = hits(rows, lane.request, lambda row: by_rowid[row[0]])
        return best(found, lane.limit), total - scored

    def in_scope(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
    ) -> np.ndarray:
        """The rowids of every record in the search's scope, as one numpy array: from
        the in-memory scope copy where it can decide the scope, else from SQL."""
        cached = self._scopes.rowids(conn, namespace, request, window)
        if cached is not None:
            return cached
        select, params = scope_rowids(self, namespace, request, window)
        # One text value instead of a row per record: handing thousands of rows to
        # Python costs more than finding them.
        (listed,) = conn.execute(
            f"SELECT group_concat(s.record) FROM ({select}) s", params
        ).fetchone()
        if listed is None:
            return np.zeros(0, dtype=np.int64)
        return np.fromstring(listed, dtype=np.int64, sep=",")

    has_scope_copy = True

    def scope_test(
        self, tx: sqlite3.Connection, namespace: str, request: SearchRequest,
        window: Window | None,
    ) -> Callable[[np.ndarray], np.ndarray | None] | None:  # fmt: skip
        return self._scopes.tester(tx, namespace, request, window)

    def semantic(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int]:
        """Exact cosine over the in-scope records, from the in-process matrix."""
        if lane.known_at is not None:
            return self._semantic_known(lane, embedder_id, query)
        namespace, request, window, limit = lane.namespace, lane.request, lane.window, lane.limit
        with self.db.snapshot() as conn:
            in_scope = self.in_scope(conn, namespace, request, window)
            if in_scope.shape[0] == 0:
                return [], 0
            # The cache, refreshed inside this read, knows which records have a vector.
            matrix = self._vectors.refresh(conn, embedder_id, int(query.shape[0]))
            view = self._vectors.view(matrix)  # the arrays this search reads
            query = query.astype(np.float32)
            # the scope copy (or SQL) decided the scope: only whether each has a vector
            rowids, positions = view.locate(in_scope)
            unembedded = int(in_scope.shape[0] - rowids.shape[0])
            if rowids.shape[0] == 0:
                return [], unembedded
            found = SemanticHits()
            # a wide scope: the index's candidates, each then scored exactly
            candidates = self._vectors.candidates(matrix, view, rowids, query, limit)
            if candidates is not None:
                rowids, positions, similarities, found.found_by = candidates
            elif view.whole(rowids):  # every row, exact: one pass in matrix order
                rowids = view.rowid_of[: view.count]
                positions = np.arange(view.count)
                similarities = view.rows[: view.count] @ query
            else:
                similarities = view.scores_at(positions, query)
            chosen = top_k(similarities, limit)
            scores = rescored(view.rows[positions[chosen]], query)
            by_rowid = dict(zip(rowids[chosen].tolist(), scores.tolist(), strict=True))
            test, params = self.in_list("rowid", list(by_rowid))
            records = conn.execute(f"SELECT {COLUMNS} FROM records WHERE {test}", params).fetchall()
        found += best(hits(records, request, lambda row: by_rowid[row[0]]), limit)
        return found, unembedded

    def build_vector_index(self, dimensions: int) -> None:
        """Builds, in this process, the graph index of every embedder's vectors of
        these dimensions that has enough of them to be searched through one."""
        with self.db.snapshot() as conn:
            embedders = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT embedder_id FROM vectors WHERE dimensions = ?", (dimensions,)
                )
            ]
            matrices = [self._vectors.refresh(conn, e, dimensions) for e in embedders]
        for matrix in matrices:
            if matrix.live >= max(1, self._vectors.min_rows):
                self._vectors.build_index(matrix)

    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        test, params = self.in_list("r.id", ids)
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT r.id, v.vector FROM records r JOIN vectors v ON v.record = r.rowid"
                " WHERE r.namespace = ? AND v.embedder_id = ? AND v.dimensions > 0"
                f" AND {test}",
                [namespace, embedder_id, *params],
            ).fetchall()
        return {row[0]: np.frombuffer(row[1], dtype="<f4").tolist() for row in rows}

    def raw(self) -> sqlite3.Connection:
        """The calling thread's connection, for tests and diagnostics."""
        return self.db.conn()

    # -- maintenance ----------------------------------------------------------------

    def scrub(self) -> None:
        # the WAL still holds the deleted pages' old images; emptied after a merge
        # beside the writers that may be under way (whose pages would keep it), never
        # waiting for one inside a write (which the merge would wait for in turn)
        with nullcontext() if self.db.writing() else self.merger.lock:
            self.db.checkpoint()

    def backup(self, path: str) -> None:
        """``VACUUM INTO``: reads one snapshot (writers carry on meanwhile) and writes a
        compact file with no free pages."""
        if Path(path).exists():
            raise InvalidInput(f"{path} already exists; back up to a new file")
        with translated(self.path):
            self.db.conn().execute("VACUUM INTO ?", (path,))

    def close(self) -> None:
        self.merger.stop()  # a merge under way is finished first
        self._vectors.close()  # and the vector copy's save under way
        self.db.close()

    def integrity(self) -> list[Finding]:
        conn = self.db.conn()
        pages = Finding("sqlite integrity")
        found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if found != ["ok"]:
            pages.problems += found[:20]
        return [pages, self._vector_finding(conn)]

    @staticmethod
    def _vector_finding(conn: sqlite3.Connection) -> Finding:
        vectors = Finding("vectors readable")
        rows = conn.execute(
            "SELECT record, embedder_id, dimensions, vector FROM vectors WHERE dimensions > 0"
        )
        for record, embedder_id, dimensions, blob in rows:
            problem = None
            if len(blob) != 4 * dimensions:
                problem = f"holds {len(blob)} bytes for {dimensions} dimensions"
            else:
                data = np.frombuffer(blob, dtype="<f4")
                if not np.isfinite(data).all() or not data.any():
                    problem = "is not finite, or all zeros"
            if problem and len(vectors.problems) < 20:
                vectors.problems.append(f"the {embedder_id} vector of row {record} {problem}")
        return vectors

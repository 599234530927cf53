"""The vectors of replaced versions on SQLite, in memory: a read-through copy of
``past_vectors`` for the semantic ``known_at`` lane.

A ``known_at`` search scores a version whose content has changed since by the vector
kept for that content (``past_vectors``, keyed by record, content hash and embedder).
Reading those rows from the file on every search grows with the revisions in scope; so
each process keeps, like the current matrix (:mod:`erstwhile.store.sqlite.vectors`) and
the scope copy (:mod:`erstwhile.store.sqlite.scope_cache`), one matrix per embedder of
the kept vectors, refreshed inside the search's own read transaction. The database
stays the only truth.

The change sequence is ``scope_log``: a record's past vectors are written only by the
write that replaces its row (``Writes.save``) and deleted only with the record (a
cascade of the hard delete), and each of those appends the record's rowid there. A
refresh re-reads the kept vectors of exactly the records logged since, so a hard
delete's vectors leave the copy on the next search, before it scores anything.

The copy is built on a process's ``WARM_AFTER``-th ``known_at`` semantic search; until
then (a CLI call) the kept vectors a search needs are read from the file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Mapping

import numpy as np

from erstwhile.store.sql.dialect import chunks
from erstwhile.store.sql.scoring import rescored
from erstwhile.store.sqlite.change_log import changes_since, records_since

#: The copy is built on a process's third ``known_at`` semantic search.
WARM_AFTER = 3
_RELOAD_MIN = 4096  # more changed records than this (and than the copy): reload it whole
_CHUNK = 500


class _Kept:
    """One embedder's kept vectors: a row per (record, content hash)."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.rows = np.zeros((64, dimensions), np.float32)
        self.slot: dict[tuple[int, str], int] = {}
        self.held: dict[int, list[str]] = {}  # record -> the content hashes kept for it
        self.free: list[int] = []
        self.used = 0

    def drop(self, record: int) -> None:
        for content_hash in self.held.pop(record, ()):
            row = self.slot.pop((record, content_hash))
            self.rows[row] = 0.0  # nothing of a removed vector stays readable
            self.free.append(row)

    def put(self, record: int, content_hash: str, vector: np.ndarray) -> None:
        row = self.slot.get((record, content_hash))
        if row is None:
            if self.free:
                row = self.free.pop()
            else:
                if self.used == self.rows.shape[0]:
                    grown = np.zeros((2 * self.used, self.dimensions), np.float32)
                    grown[: self.used] = self.rows
                    self.rows = grown
                row, self.used = self.used, self.used + 1
            self.slot[(record, content_hash)] = row
            self.held.setdefault(record, []).append(content_hash)
        self.rows[row] = vector


class PastVectors:
    """Per-process copies of ``past_vectors``, per embedder, kept in step with the file
    through ``scope_log``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, _Kept] = {}
        self._seq: dict[str, int] = {}  # scope_log seq each copy has caught up to
        self._searches = 0
        self.warm_after = WARM_AFTER  # tests set 1: the copy from the first search

    def scores(
        self,
        conn: sqlite3.Connection,
        embedder_id: str,
        query: np.ndarray,
        wanted: Mapping[int, str],
    ) -> dict[int, float]:
        """Cosine similarity of ``query`` (a float32 unit vector) with the kept vector
        of each record's named content (``wanted``: record rowid -> content hash), for
        those that have one. Call inside the search's read."""
        if not wanted:
            return {}
        dimensions = int(query.shape[0])
        with self._lock:
            self._searches += 1
            if embedder_id not in self._kept and self._searches < self.warm_after:
                return _from_file(conn, embedder_id, query, wanted)
            kept = self._refresh(conn, embedder_id, dimensions)
            records, rows = [], []
            for record, content_hash in wanted.items():
                row = kept.slot.get((record, content_hash))
                if row is not None:
                    records.append(record)
                    rows.append(row)
            if not rows:
                return {}
            # row by row, as the matrix's best are (ties by id: scoring.rescored)
            similarities = rescored(kept.rows[np.asarray(rows, np.int64)], query)
        return dict(zip(records, similarities.tolist(), strict=True))

    def _refresh(self, conn: sqlite3.Connection, embedder_id: str, dimensions: int) -> _Kept:
        kept = self._kept.get(embedder_id)
        seq = self._seq.get(embedder_id, -1)
        changes, top, pruned = changes_since(conn, seq)
        if kept is not None and kept.dimensions == dimensions and not changes:
            return kept
        if (
            kept is None
            or pruned
            or kept.dimensions != dimensions
            or changes > max(_RELOAD_MIN, len(kept.slot))
        ):
            kept = self._kept[embedder_id] = _Kept(dimensions)
            self._put(kept, conn.execute(
                "SELECT record, content_hash, vector FROM past_vectors"
                " WHERE embedder_id = ? AND dimensions = ?", (embedder_id, dimensions),
            ))  # fmt: skip
        else:
            records = sorted(records_since(conn, seq))
            for chunk in chunks(records, _CHUNK):
                for record in chunk:
                    kept.drop(record)
                marks = ", ".join("?" for _ in chunk)
                self._put(kept, conn.execute(
                    "SELECT record, content_hash, vector FROM past_vectors"
                    f" WHERE embedder_id = ? AND dimensions = ? AND record IN ({marks})",
                    [embedder_id, dimensions, *chunk],
                ))  # fmt: skip
        self._seq[embedder_id] = top or 0
        return kept

    @staticmethod
    def _put(kept: _Kept, rows: Iterable[tuple[int, str, bytes]]) -> None:
        for record, content_hash, blob in rows:
            kept.put(record, content_hash, np.frombuffer(blob, dtype="<f4"))

    def held(self, embedder_id: str) -> set[tuple[int, str]]:
        """What the copy holds for this embedder (for tests)."""
        with self._lock:
            kept = self._kept.get(embedder_id)
            return set() if kept is None else set(kept.slot)


def _from_file(
    conn: sqlite3.Connection, embedder_id: str, query: np.ndarray, wanted: Mapping[int, str]
) -> dict[int, float]:
    """The scores of the wanted kept vectors, read from ``past_vectors`` (no copy)."""
    scores: dict[int, float] = {}
    for chunk in chunks(list(wanted), _CHUNK):
        marks = ", ".join("?" for _ in chunk)
        for record, content_hash, blob in conn.execute(
            "SELECT record, content_hash, vector FROM past_vectors"
            f" WHERE embedder_id = ? AND dimensions = ? AND record IN ({marks})",
            [embedder_id, int(query.shape[0]), *chunk],
        ):
            if wanted.get(record) == content_hash:
                vector = np.frombuffer(blob, dtype="<f4").reshape(1, -1)
                scores[record] = float(rescored(vector, query)[0])
    return scores

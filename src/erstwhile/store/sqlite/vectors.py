"""The vector lane on SQLite: exact cosine over the in-scope rows.

Vectors live in the ``vectors`` table, in the same file and transactions as the
records. To search them fast, each process keeps a read-through copy per embedder
in one numpy matrix, refreshed before every search from the file's one change feed
(:mod:`erstwhile.store.sqlite.change_log`): it reads the vector each record logged
since has now; it is never a source of truth. The scope (namespace, filters, the
temporal rule) is decided in SQL first — a true pre-filter — and only those rows are
scored.

Stale cache rows cannot leak: every write of a vector row, and every change or delete
of its record's row, logs the record, so a refresh sees it; a withdrawn vector (no
dimensions) or a hard-deleted record's (no row) drops its cached row, which is zeroed,
so nothing of it is saved again; and record rowids are never reused (AUTOINCREMENT),
so a hard-deleted record's cached row is never in scope.

A matrix of ``vector_file.SAVE_MIN`` vectors or more is saved beside the file
(:mod:`erstwhile.store.sqlite.vector_file`) by a writer thread of the cache: a search
that makes a save due only takes a snapshot of the arrays (milliseconds), and a fresh
process adopts a saved copy only once its commit point in the database and its
checksum agree.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

import numpy as np

from erstwhile.store.sqlite import ann, graph_index, vector_file
from erstwhile.store.sqlite.ann import ListIndex
from erstwhile.store.sqlite.change_log import changes_since
from erstwhile.store.sqlite.connection import connect, log
from erstwhile.store.sqlite.graph_index import GraphIndex
from erstwhile.store.sqlite.matrix_view import View

__all__ = ["VectorCache", "View"]


class _Matrix:
    """All vectors of one embedder, addressable by record rowid."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.rows = np.zeros((1024, dimensions), dtype=np.float32)
        self.count = 0
        self.position = np.full(1024, -1, dtype=np.int64)  # rowid -> row, -1 = none
        self.rowid_of = np.full(1024, -1, dtype=np.int64)  # row -> rowid, -1 = withdrawn
        self.seq = -1  # the scope_log entry read up to; -1: nothing read
        self.live = 0  # rowids with a vector
        self.index = ListIndex(dimensions)
        self.graph = GraphIndex(dimensions)  # searched first once built (graph_index)
        #: Bumped when :meth:`regroup` moves rows: positions of one layout are never
        #: read against the arrays of another (a search holds one :class:`View`).
        self.layout = 0
        # while the rows are copied outside the lock into the lists' runs
        # (``regroup``): the positions written meanwhile, which the copy takes again
        # at its swap
        self.written: list[np.ndarray] | None = None
        self.adopted = False  # started from a saved copy (vector_file)

    def reserve(self, rows: int, top_rowid: int) -> None:
        """Room for ``rows`` vectors and rowids up to ``top_rowid`` (rows past ``count``
        are never read, so they need no zeroing)."""
        if rows > self.rows.shape[0]:
            grown_rows = np.empty((rows, self.dimensions), np.float32)
            grown_rows[: self.count] = self.rows[: self.count]
            self.rows = grown_rows
        if rows > self.rowid_of.shape[0]:
            grown = np.full(rows, -1, dtype=np.int64)
            grown[: self.count] = self.rowid_of[: self.count]
            self.rowid_of = grown
        if top_rowid >= self.position.shape[0]:
            grown = np.full(top_rowid + 1, -1, dtype=np.int64)
            grown[: self.position.shape[0]] = self.position
            self.position = grown

    def put(self, rowids: np.ndarray, vectors: np.ndarray) -> None:
        if rowids.shape[0] == 0:  # a write of no vectors (withdraw takes none alike)
            return
        top = int(rowids.max())
        if top >= self.position.shape[0]:
            self.reserve(0, max(top, 2 * self.position.shape[0]))
        fresh = np.unique(rowids[self.position[rowids] < 0])
        need = self.count + fresh.shape[0]
        if need > self.rows.shape[0]:
            self.reserve(max(need, 2 * self.rows.shape[0]), 0)
        self.position[fresh] = np.arange(self.count, need)
        self.rowid_of[self.count : need] = fresh
        self.live += need - self.count
        self.count = need
        self.rows[self.position[rowids]] = vectors
        if self.written is not None:
            self.written.append(self.position[rowids])
        self.index.changed(rowids, vectors)
        self.graph.changed(rowids, vectors)

    def withdraw(self, rowids: np.ndarray) -> None:
        inside = np.unique(rowids[rowids < self.position.shape[0]])
        held = self.position[inside]
        held = held[held >= 0]
        self.live -= int(held.shape[0])
        self.rowid_of[held] = -1
        self.rows[held] = 0.0  # nothing of a withdrawn or erased vector is saved again
        self.position[inside] = -1
        self.index.changed(inside, None)
        self.graph.changed(inside, None)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What an index build reads outside the lock (take it under the lock): every
        rowid with a vector, its row's position, and the rows (a grown matrix is a new
        array: this one stays as is)."""
        rowids = np.flatnonzero(self.position >= 0)
        return rowids, self.position[rowids], self.rows

    def current(self, changed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of these rowids still have a vector (a mask), and those vectors: what a
        build applies of the changes made while it ran."""
        alive = self.has(changed)
        return alive, self.gather(changed[alive])

    def has(self, rowids: np.ndarray) -> np.ndarray:
        """Which of these records have a vector (a boolean mask)."""
        if rowids.shape[0] and int(rowids.max()) < self.position.shape[0]:
            return self.position[rowids] >= 0  # every rowid known: one gather (wide scopes)
        found = np.zeros(rowids.shape[0], dtype=bool)
        inside = rowids < self.position.shape[0]
        found[inside] = self.position[rowids[inside]] >= 0
        return found

    def gather(self, rowids: np.ndarray) -> np.ndarray:
        return self.rows[self.position[rowids]]

    def view(self) -> View:
        """The arrays as they are now, for one search to read without the lock."""
        return View(self.rows, self.position, self.rowid_of, self.count, self.live, self.layout)

    def regroup(self, order: np.ndarray, rows: np.ndarray, written: list[np.ndarray]) -> None:
        """Takes ``rows`` (this matrix's vectors of ``order``, every rowid that had one
        when the copy began, in that order, copied outside the lock; room past them) as
        its rows, so the index's lists lie in runs of rows, and carries over what was
        written meanwhile (``written``: the positions ``put`` wrote since): rewritten
        vectors are taken again, withdrawn ones dropped, added ones appended. New
        arrays, so a search holding the old ones reads them as they were."""
        count = int(order.shape[0])
        position = np.full(self.position.shape[0], -1, dtype=np.int64)
        position[order] = np.arange(count)
        rowid_of = np.full(rows.shape[0], -1, dtype=np.int64)
        rowid_of[:count] = order
        if written:  # rewritten since the copy began: their vectors now
            again = self.rowid_of[np.unique(np.concatenate(written))]
            again = again[again >= 0]
            again = again[position[again] >= 0]
            rows[position[again]] = self.rows[self.position[again]]
        gone = order[self.position[order] < 0]  # withdrawn since
        rowid_of[position[gone]] = -1
        position[gone] = -1
        held = self.rowid_of[: self.count]
        added = held[(held >= 0) & (position[np.maximum(held, 0)] < 0)]  # added since
        vectors = self.rows[self.position[added]]
        self.rows, self.position, self.rowid_of, self.count = rows, position, rowid_of, count
        self.live = count - int(gone.shape[0])
        self.layout += 1
        if added.shape[0]:  # appended past the copied rows, in the room reserve makes
            need = count + int(added.shape[0])
            if need > self.rows.shape[0]:  # grown as put() grows it
                self.reserve(max(need, 2 * self.rows.shape[0]), 0)
            self.rows[count:need] = vectors
            self.position[added] = np.arange(count, need)
            self.rowid_of[count:need] = added
            self.count, self.live = need, self.live + int(added.shape[0])


class VectorCache:
    """Per-process, per-embedder matrices, kept in step with the ``vectors`` table."""

    def __init__(self, database: str = "") -> None:
        self._matrices: dict[str, _Matrix] = {}
        self._lock = threading.Lock()
        self.background = True  # tests set False: an index is built inside the search
        # the scope the index answers (tests lower them to reach it with few rows)
        self.min_rows = ann.MIN_ROWS
        self.min_share = ann.MIN_SHARE
        #: "hnsw": the graph answers once built (the list index, if built, serves
        #: until then); "ivf": the list index alone (the benches compare them)
        self.index_kind = "hnsw"
        self.graph_min_rows = graph_index.MIN_ROWS
        self.graph_rows_per_breadth: float = graph_index.ROWS_PER_BREADTH
        self.database = database
        self.folder = vector_file.folder(database)  # the saved copies (None: none)
        self.save_min = vector_file.save_min()
        self._unsaved: dict[str, int] = {}  # vectors read from the table since a save
        # the writer thread's work: the latest snapshot due per embedder
        self._saves = threading.Condition()
        self._due: dict[str, vector_file.Snapshot] = {}
        self._writer: threading.Thread | None = None
        self._closed = False
        self._threads: list[threading.Thread] = []  # index builds under way (``_run``)

    def view(self, matrix: _Matrix) -> View:
        """The matrix's arrays as one consistent reading (taken under the lock)."""
        with self._lock:
            return matrix.view()

    def candidates(
        self, matrix: _Matrix, view: View, rowids: np.ndarray, query: np.ndarray, limit: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
        """For a scope of enough rows (``rowids``: the in-scope records with a vector),
        what an index offers, a superset of its ``limit`` nearest in the scope: their
        rowids, their rows in ``view``, their exact similarities to ``query`` and the
        index's name. None when no index answers (the caller scores the scope exactly).
        The graph (:mod:`graph_index`) answers every scope whose depth its calibration
        reaches, once built (a wide scope starts its build); until then, the list index
        as below."""
        if self.index_kind == "hnsw" and rowids.shape[0] >= max(1, self.graph_min_rows):
            found = self._graph_candidates(matrix, view, rowids, query, limit)
            if found is not None:
                return (*found, "hnsw")
        listed = self._list_candidates(matrix, view, rowids, query, limit)
        return None if listed is None else (*listed, "ivf")

    def _graph_candidates(
        self, matrix: _Matrix, view: View, rowids: np.ndarray, query: np.ndarray, limit: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        graph = matrix.graph
        with self._lock:
            wide = rowids.shape[0] >= self.min_share * matrix.live
            if wide and (not graph.ready or graph.due()) and graph.start():
                self._run(self._graph_build, matrix)  # a rebuild: the old graph serves
            tail = int(graph.tail.shape[0])
            if graph.ready and not graph.building and not graph.absorbing and tail and (
                tail >= graph_index.ABSORB_MIN or not self.background
            ):  # fmt: skip
                graph.absorbing = True
                self._run(self._graph_absorb, matrix)
            if not graph.ready:
                return None
            return graph.search(rowids, view.whole(rowids), query, limit, view,
                                self.graph_rows_per_breadth)  # fmt: skip

    def _run(
        self, work: Callable[[_Matrix], None], matrix: _Matrix,
        name: str = "erstwhile-vector-graph",
    ) -> None:  # fmt: skip
        """Runs ``work`` (called with the lock held): in a background thread, or (tests)
        right here, the lock released meanwhile."""
        if self.background:
            thread = threading.Thread(target=work, args=(matrix,), daemon=True, name=name)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
            return
        self._lock.release()
        try:
            work(matrix)
        finally:
            self._lock.acquire()

    def _graph_build(self, matrix: _Matrix) -> None:
        with self._lock:
            rowids, positions, rows = matrix.snapshot()
        matrix.graph.build(rowids, positions, rows, self._lock, matrix.current)

    def _graph_absorb(self, matrix: _Matrix) -> None:
        matrix.graph.absorb(self._lock, matrix.current)

    def _list_candidates(
        self, matrix: _Matrix, view: View, rowids: np.ndarray, query: np.ndarray, limit: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The list index's candidates: for a wide scope (``rowids``: the in-scope
        records with a vector), what the index offers, a superset of its ``limit``
        nearest in the scope: their rowids, their rows in ``view`` and their
        similarities to ``query``. None when the scope
        is not wide, or its index is not built yet (one is started) or finds too few:
        the caller scores the scope exactly. A scope of enough rows but under
        ``min_share`` of the store uses a built index only where it pays
        (``ListIndex.pays``); it never starts a build."""
        with self._lock:
            if rowids.shape[0] < max(1, self.min_rows):
                return None
            if rowids.shape[0] < self.min_share * matrix.live:  # narrow: when it pays
                if not matrix.index.ready or not matrix.index.pays(int(rowids.shape[0]), limit):
                    return None
            elif (not matrix.index.ready or matrix.index.due()) and matrix.index.start():
                self._run(self._snapshot_build, matrix, "erstwhile-vector-index")  # or a retrain
            if not matrix.index.ready:
                return None
            member: np.ndarray | None = None
            if rowids.shape[0] < view.live:
                member = np.zeros(view.position.shape[0], dtype=bool)
                member[rowids] = True
            found = matrix.index.search(member, int(rowids.shape[0]), query, limit, view)
        if found is None:
            return None
        rowids, positions, similarities = found
        if similarities is None:  # the lists' rows are not in runs: gathered one by one
            similarities = view.scores_at(positions, query)
        return rowids, positions, similarities

    def build_index(self, matrix: _Matrix) -> None:
        """Builds the matrix's indexes now, in this thread, unless it has them."""
        with self._lock:
            started = matrix.index.start()
            graph = self.index_kind == "hnsw" and matrix.graph.start()
        if started:
            self._snapshot_build(matrix)
        if graph:
            self._graph_build(matrix)

    def _snapshot_build(self, matrix: _Matrix) -> None:
        with self._lock:
            rowids, positions, rows = matrix.snapshot()
        matrix.index.build(rowids, positions, rows, self._lock, matrix.current)
        self._regroup(matrix)
        with self._lock:  # the index and its matrix, saved at one seq
            for embedder_id, held in self._matrices.items():
                if held is matrix and matrix.count >= self.save_min:
                    self._save(embedder_id, matrix)

    def _regroup(self, matrix: _Matrix) -> None:
        """Lays the matrix's rows out in its index's lists, each list a run of rows (a
        probe then scores a run in one pass instead of gathering its rows), unless the
        index is not built or already so laid out, the lists do not hold every vector,
        or the rows are being copied (by another regroup). The
        copy is made outside the lock (at 1M it took 0.8-5 s, page faults included);
        the swap, with what was written meanwhile, under it."""
        with self._lock:
            index = matrix.index
            if (
                not index.ready or matrix.written is not None or index.size != matrix.live
                or (index.runs is not None and index.layout == matrix.layout)
            ):  # fmt: skip
                return
            order = np.concatenate(index.members)
            runs = np.concatenate(([0], np.cumsum([m.shape[0] for m in index.members])))
            source, positions = matrix.rows, matrix.position[order]
            lists, layout = index.centroids, matrix.layout
            matrix.written = []  # what put() writes meanwhile, taken again at the swap
        try:
            count = int(order.shape[0])
            rows = np.empty((max(1024, count + count // 4), matrix.dimensions), np.float32)
            for start in range(0, count, _COPY_CHUNK):
                stop = min(count, start + _COPY_CHUNK)
                np.take(source, positions[start:stop], axis=0, out=rows[start:stop])
        except MemoryError:  # the lists are gathered, as before
            with self._lock:
                matrix.written = None
            return
        with self._lock:
            written, matrix.written = matrix.written or [], None
            if matrix.layout != layout or index.centroids is not lists:
                return  # another layout or other lists meanwhile: this copy is void
            matrix.regroup(order, rows, written)
            index.grouped(matrix.position, matrix.layout, runs)

    def matrices(self, dimensions: int) -> list[str]:
        """The embedders whose matrix this process holds, of these dimensions."""
        with self._lock:
            return [e for e, m in self._matrices.items() if m.dimensions == dimensions]

    def refresh(self, conn: sqlite3.Connection, embedder_id: str, dimensions: int) -> _Matrix:
        """Takes in every change logged since the last refresh (inside the caller's read):
        the vector each record logged has now, or none."""
        with self._lock:
            matrix = self._matrices.get(embedder_id)
            if matrix is None or matrix.dimensions != dimensions:
                matrix = self._matrices[embedder_id] = _Matrix(dimensions)
            if matrix.seq < 0 and self.folder is not None:
                self._adopt(conn, embedder_id, matrix)
            changes, top, pruned = changes_since(conn, matrix.seq)
            if pruned:  # changes it has not read are gone from the log: read it whole
                matrix = self._matrices[embedder_id] = _Matrix(dimensions)
            if matrix.seq < 0:
                self._load(conn, embedder_id, matrix)
            elif changes:
                self._catch_up(conn, embedder_id, matrix)
            matrix.seq = max(matrix.seq, top or 0)
            if self._unsaved.get(embedder_id, 0) * _SAVE_SHARE > matrix.count >= self.save_min:
                self._save(embedder_id, matrix)
            return matrix

    def _load(self, conn: sqlite3.Connection, embedder_id: str, matrix: _Matrix) -> None:
        """Reads an empty matrix whole from the table."""
        count, top = conn.execute(
            "SELECT (SELECT count(*) FROM vectors WHERE embedder_id = ?),"
            " (SELECT max(rowid) FROM records)",
            (embedder_id,),
        ).fetchone()
        if count:  # sized once (an upper bound)
            matrix.reserve(int(count), int(top))
        self._take(embedder_id, matrix, conn.execute(
            "SELECT record, vector, dimensions FROM vectors"
            " WHERE embedder_id = ? AND dimensions = ? ORDER BY record",
            (embedder_id, matrix.dimensions),
        ))  # fmt: skip
        matrix.seq = 0

    def _catch_up(self, conn: sqlite3.Connection, embedder_id: str, matrix: _Matrix) -> None:
        """Reads the vector of each record logged past the matrix's seq: present (put,
        unless its row holds it already), withdrawn or gone with its record (dropped)."""
        self._take(embedder_id, matrix, conn.execute(
            "SELECT l.record, v.vector, v.dimensions"
            " FROM (SELECT DISTINCT record FROM scope_log WHERE seq > ?) AS l"
            " LEFT JOIN vectors v ON v.record = l.record AND v.embedder_id = ?"
            " ORDER BY l.record",
            (matrix.seq, embedder_id),
        ), changed_only=True)  # fmt: skip

    def _take(
        self, embedder_id: str, matrix: _Matrix, cursor: sqlite3.Cursor, *,
        changed_only: bool = False,
    ) -> None:  # fmt: skip
        """Puts the present vectors of (record, vector, dimensions) rows, drops the
        records of the others; in chunks: a first load reads every vector, and a chunk's
        row objects are freed (and their memory reused) before the next is read."""
        dimensions = matrix.dimensions
        while rows := cursor.fetchmany(_CHUNK):
            present = [r for r in rows if r[2] == dimensions]
            gone = np.asarray([r[0] for r in rows if not r[2]], dtype=np.int64)  # or no row
            gone = gone[matrix.has(gone)]
            if gone.shape[0]:
                matrix.withdraw(gone)
            taken = int(gone.shape[0])
            if present:
                rowids = np.fromiter((r[0] for r in present), np.int64, len(present))
                blob = b"".join(r[1] for r in present)
                vectors = np.frombuffer(blob, dtype="<f4").reshape(len(present), dimensions)
                if changed_only:  # a record logged for another change keeps its row
                    held = matrix.has(rowids)
                    same = np.zeros(rowids.shape[0], dtype=bool)
                    same[held] = (matrix.gather(rowids[held]) == vectors[held]).all(axis=1)
                    rowids, vectors = rowids[~same], vectors[~same]
                matrix.put(rowids, vectors)
                taken += int(rowids.shape[0])
            self._unsaved[embedder_id] = self._unsaved.get(embedder_id, 0) + taken

    def _adopt(self, conn: sqlite3.Connection, embedder_id: str, matrix: _Matrix) -> None:
        """Starts an empty matrix from its saved copy, when there is a valid one."""
        assert self.folder is not None
        saved = vector_file.load(self.folder, conn, embedder_id, matrix.dimensions)
        if saved is None:
            return
        rowids = saved.rowids
        present = np.flatnonzero(rowids >= 0)
        top = int(rowids.max()) if rowids.shape[0] else 0
        matrix.rows = saved.rows  # its rows past count are room
        matrix.count = int(rowids.shape[0])
        matrix.position = np.full(max(1024, top + 1), -1, dtype=np.int64)
        matrix.position[rowids[present]] = present
        matrix.rowid_of = np.full(max(1024, saved.rows.shape[0]), -1, dtype=np.int64)
        matrix.rowid_of[: rowids.shape[0]] = rowids
        matrix.live = int(present.shape[0])
        matrix.seq, matrix.adopted = saved.seq, True
        index = saved.index
        if index is not None:
            matrix.index.install(index.centroids, index.members, index.probes, index.trained)
            if index.runs is not None:  # the saved rows hold the lists in runs
                matrix.index.grouped(matrix.position, matrix.layout, index.runs)
        self._unsaved[embedder_id] = 0

    def _save(self, embedder_id: str, matrix: _Matrix) -> None:
        """Hands a snapshot of the matrix (and its index) to the writer thread: under
        the lock, only a copy of the row -> rowid array is made."""
        self._unsaved[embedder_id] = 0
        if self.folder is None:
            return
        index, parts = matrix.index, None
        if index.centroids is not None:
            runs = index.runs if index.runs is not None and index.layout == matrix.layout else None
            parts = vector_file.IndexParts(index.centroids, list(index.members),
                                           index.probes, index.trained, runs)  # fmt: skip
        snapshot = vector_file.Snapshot(
            embedder_id, matrix.dimensions, matrix.seq, matrix.rows,
            matrix.rowid_of[: matrix.count].copy(), parts,
        )  # fmt: skip
        with self._saves:
            if self._closed:
                return
            self._due[embedder_id] = snapshot
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write, daemon=True,
                                                name="erstwhile-vector-save")  # fmt: skip
                self._writer.start()

    def _write(self) -> None:
        """The writer thread: writes the snapshots due, one at a time, until none is."""
        folder = self.folder
        assert folder is not None
        while True:
            with self._saves:
                if not self._due:
                    self._writer = None
                    self._saves.notify_all()
                    return
                snapshot = self._due.pop(next(iter(self._due)))
            written = vector_file.write(folder, snapshot)
            if written is None:
                continue
            try:
                conn = connect(self.database)
                try:
                    vector_file.commit(conn, folder, snapshot, written)
                finally:
                    conn.close()
            except Exception:  # the database cannot be opened: this copy is not kept
                log.warning("the vector copy was not saved", exc_info=True)
                vector_file.abandon(folder, snapshot, written)

    def saved(self, timeout: float | None = None) -> bool:
        """Waits until the writer thread has written every save due (tests, close)."""
        with self._saves:
            return self._saves.wait_for(
                lambda: self._writer is None or not self._writer.is_alive(), timeout
            )

    def close(self) -> None:
        """Finishes the saves due; later ones are not made. Stops the graph builds
        under way at their next step, and waits for every index build to end, so
        nothing of the store runs in the host's process after it."""
        with self._saves:
            self._closed = True
        with self._lock:
            for matrix in self._matrices.values():
                matrix.graph.stopped = True
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()
        self.saved()


_CHUNK = 4096


#: Rows copied per step outside the lock, from a mapping or into the lists' runs (24
#: MiB at 384 dimensions).
_COPY_CHUNK = 16384
_SAVE_SHARE = 4  # saved again once the vectors read since the last save pass 1/4

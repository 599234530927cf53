"""The graph index of the SQLite vector lane: faiss's HNSW over one embedder's vectors,
answering searches whose scope holds enough vectors.

An inverted file needs many probes on sentence embeddings (they are not tightly
clustered: at 100k real sentence vectors the list index probed 23-41 % of its lists
for recall 0.95); a navigable graph reaches the same recall visiting a few thousand
vectors (bench/results/real_vectors_*.json). The graph is a copy, like the matrix it
is built from (SPEC §12): never written to disk, built from the matrix in a
background thread while searches use what exists (the list index, else exact), and
kept in step as the matrix changes:

- a vector the matrix takes joins the *tail* (rowids not in the graph yet), which a
  search scores exactly; the tail is added to the graph a chunk at a time, in the
  background, once it is ``ABSORB_MIN`` long;
- a withdrawn, rewritten or erased vector's node becomes a tombstone: its stored
  vector is overwritten with zeros, and it is never a candidate (a search asks the
  graph only for the labels of in-scope rowids whose node is current, and maps every
  label back through ``label_of``); once tombstones pass ``TOMBSTONE_SHARE`` of the
  nodes, the graph is built anew (the old one serves meanwhile).

Every candidate is rescored exactly from the matrix, so every score is the exact
cosine. How wide a search is (faiss's ``efSearch``) is calibrated per build on the
store's own vectors: held-out stored vectors as queries (leave-one-out: each query's
own node is not counted), their exact nearest in random scopes of each share from the
whole store down to 1/64 (``DEPTHS``), the smallest breadth reaching ``TARGET`` mean
recall@10 with ``FLOOR`` at the 10th percentile. A scope whose depth no breadth
reaches is scored exactly.

faiss runs its builds with OpenMP: a build asks for ``build_threads()`` threads for
its own thread and restores that thread's setting after (OpenMP's setting is per
calling thread, so the host's threads are left as they were); a single-query search
runs on the caller's thread alone.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from erstwhile.store.sql.scoring import gathered_scores
from erstwhile.store.sqlite.connection import log

#: Fewer in-scope vectors than this: exact (the lane's gather of a few thousand rows
#: costs about what a graph search does).
MIN_ROWS = 5_000
#: A scope is searched through the graph only when it holds at least this many rows
#: per unit of its calibrated breadth: a filtered walk at breadth b costs about what
#: scoring 18·b gathered rows exactly does (100k real vectors, a scope of 8,440: breadth
#: 512 took 9.4 ms p50, the exact path 8.6; results/real_vectors_100k_hnsw.json).
ROWS_PER_BREADTH = 20
#: Links per node (faiss's M) and the breadth of a build's searches.
LINKS = 32
CONSTRUCTION = 64
#: The search breadths a calibration tries, in order.
BREADTHS = (16, 32, 64, 128, 256, 512, 1024)
#: The mean recall@10 a calibrated breadth reaches on held-out stored vectors, and its
#: 10th percentile's floor. Real queries sit farther from the store than its own
#: vectors do: at 100k real sentence vectors, a target of 0.97 chose breadth 32, which
#: gave held-out query sentences recall 0.946 (p10 0.8; bench/results/
#: real_vectors_100k_hnsw_target97.json); hence 0.99.
TARGET = 0.99
FLOOR = 0.9
#: Search depths (limit / share of the store in scope) calibrated: scope shares 1 to
#: 1/64 at a limit of 10 (a scope is searched at the breadth of the next depth up).
DEPTHS = (10, 15, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640)
_QUERIES = 200
_K = 10
#: Candidates asked of the graph: this times the limit (rescored exactly).
MARGIN = 2
#: Tail vectors added to the graph per hold of the lock.
ABSORB_CHUNK = 512
#: A tail this long is added to the graph in the background.
ABSORB_MIN = 256
#: Build anew once tombstones are this share of the nodes.
TOMBSTONE_SHARE = 0.25
#: Calibrate again once the graph holds this many times the vectors calibrated on.
RECALIBRATE_GROWTH = 2.0
_CHUNK = 65536
#: Vectors a build adds at a time; a closed cache stops it between two.
_ADD_CHUNK = 8192


class _Stopped(Exception):
    """A build ends: its cache was closed."""


def build_threads() -> int:
    """The threads a build asks OpenMP for: the host's ``OMP_NUM_THREADS`` when set,
    else half the cores (searches and writers keep the rest)."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(1, (os.cpu_count() or 1) // 2)


def _faiss() -> Any:
    import faiss  # imported when a graph is first built (about 0.3 s)

    return faiss


def _bitmap(labels: np.ndarray, count: int) -> np.ndarray:
    """faiss's IDSelectorBitmap layout: bit ``i & 7`` of byte ``i >> 3`` marks label i."""
    marks = np.zeros(count, dtype=bool)
    marks[labels] = True
    return np.packbits(marks, bitorder="little")


def search_labels(index: Any, queries: np.ndarray, k: int, breadth: int,
                  selected: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """The labels faiss finds for ``queries`` (-1 where fewer), among ``selected``
    labels when given (a bitmap of them is handed to faiss; None: every label)."""
    faiss = _faiss()
    bits = None
    if selected is not None:
        bits = _bitmap(selected, index.ntotal)
        chooser = faiss.IDSelectorBitmap(index.ntotal, faiss.swig_ptr(bits))
        params = faiss.SearchParametersHNSW(efSearch=max(breadth, k), sel=chooser)
    else:
        params = faiss.SearchParametersHNSW(efSearch=max(breadth, k))
    _, labels = index.search(np.ascontiguousarray(queries, dtype=np.float32), k, params=params)
    del bits  # held until faiss is done with it
    return labels


def calibrate(index: Any, rows: np.ndarray | _Snapshot, rng: np.random.Generator) -> np.ndarray:
    """The breadth for each of ``DEPTHS`` (0: none reaches the target): held-out stored
    vectors as queries, and for depth d a random scope of 10/d of the labels; recall
    of the exact top 10 of the scope with the query's own label left out (found or
    not: leave-one-out)."""
    count = rows.shape[0]
    picks = np.sort(rng.choice(count, min(_QUERIES, count), replace=False))
    queries = np.ascontiguousarray(rows[picks], dtype=np.float32)
    scopes: list[np.ndarray] = [np.ones(count, dtype=bool)]
    scopes += [np.asarray(rng.random(count) < _K / depth) for depth in DEPTHS[1:]]
    # each scope's exact top 11 (the query itself may be one) by a running merge over
    # chunks of rows: no queries x rows score matrix (800 MB at 1M)
    want = _K + 1
    best = [np.zeros((queries.shape[0], 0), np.int64) for _ in scopes]
    best_scores = [np.zeros((queries.shape[0], 0), np.float32) for _ in scopes]
    for start in range(0, count, _CHUNK):
        stop = min(count, start + _CHUNK)
        scores = queries @ np.asarray(rows[start:stop]).T
        for s, scope in enumerate(scopes):
            members = np.flatnonzero(scope[start:stop])
            merged = np.concatenate([best_scores[s], scores[:, members]], 1)
            ids = np.concatenate([best[s], np.broadcast_to(members + start,
                                  (queries.shape[0], members.shape[0]))], 1)  # fmt: skip
            k = min(want, merged.shape[1])
            if k == 0:
                continue
            keep = np.argpartition(-merged, k - 1, axis=1)[:, :k]
            best_scores[s] = np.take_along_axis(merged, keep, 1)
            best[s] = np.take_along_axis(ids, keep, 1)
    truths = []  # per scope, per query: its true top 10, itself left out
    for ids, scores in zip(best, best_scores, strict=True):
        order = np.argsort(-scores, axis=1, kind="stable")
        ranked = np.take_along_axis(ids, order, 1)
        truths.append([[int(i) for i in row if i != own][:_K]
                       for row, own in zip(ranked, picks, strict=True)])  # fmt: skip
    breadths = np.zeros(len(DEPTHS), dtype=np.int64)
    step = 0
    for d, (scope, truth) in enumerate(zip(scopes, truths, strict=True)):
        k = max(len(t) for t in truth)
        if k == 0:
            continue
        selected = np.flatnonzero(scope)
        while step < len(BREADTHS):
            found = search_labels(index, queries, k + 1, BREADTHS[step], selected)
            recall = np.array([
                len(set(f.tolist()) & set(t)) / len(t) if t else 1.0
                for f, t in zip(found, truth, strict=True)
            ])  # fmt: skip
            if recall.mean() >= TARGET and np.quantile(recall, 0.1) >= FLOOR:
                breadths[d] = BREADTHS[step]
                break
            step += 1  # a deeper search needs at least the breadth of a shallower one
    return breadths


class GraphIndex:
    """The HNSW copy of one matrix, keyed by record rowid. Every method but ``build``
    and ``absorb``'s work outside the lock is called with the cache's lock held."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.index: Any = None  # faiss.IndexHNSWFlat, inner product on unit rows
        self.rowid_of = np.zeros(0, dtype=np.int64)  # label -> rowid, -1 = tombstone
        self.label_of = np.full(0, -1, dtype=np.int64)  # rowid -> its current label
        self.breadths = np.zeros(len(DEPTHS), dtype=np.int64)
        self.calibrated = 0  # vectors the breadths were calibrated on
        self.built_s = 0.0  # the last build's seconds (graph and calibration)
        self.size = 0  # current labels in the graph
        self.tail = np.zeros(0, dtype=np.int64)  # rowids taken since, not in the graph
        self.absorbing = False
        self._pending: set[int] | None = None  # rowids changed while a build runs
        self.unavailable = False  # faiss would not load: the list index serves
        #: The cache was closed: a build or an absorb under way ends at its next step
        #: (``_ADD_CHUNK`` vectors at most), and none starts.
        self.stopped = False

    @property
    def ready(self) -> bool:
        return self.index is not None

    @property
    def building(self) -> bool:
        return self._pending is not None

    @property
    def tombstones(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal) - self.size

    def due(self) -> bool:
        """A rebuild is due: too many tombstones, or the store outgrew the calibration."""
        if not self.ready or self.building:
            return False
        held = self.size + int(self.tail.shape[0])
        return (self.tombstones > TOMBSTONE_SHARE * max(1, int(self.index.ntotal))
                or held > RECALIBRATE_GROWTH * max(1, self.calibrated))  # fmt: skip

    def start(self) -> bool:
        """Marks a build as begun; False when one is running, or one is done and not due."""
        if (
            self.stopped
            or self.unavailable
            or self._pending is not None
            or (self.ready and not self.due())
        ):
            return False
        self._pending = set()
        return True

    def changed(self, rowids: np.ndarray, vectors: np.ndarray | None) -> None:
        """The matrix took ``vectors`` for ``rowids`` (None: withdrew or erased them):
        their nodes become tombstones (zeroed), and taken ones join the tail."""
        if self._pending is not None:
            self._pending.update(rowids.tolist())
        if self.index is None or rowids.shape[0] == 0:
            return
        rowids = np.unique(rowids)
        top = int(rowids.max())
        if top >= self.label_of.shape[0]:
            grown = np.full(max(top + 1, 2 * self.label_of.shape[0]), -1, dtype=np.int64)
            grown[: self.label_of.shape[0]] = self.label_of
            self.label_of = grown
        old = self.label_of[rowids]
        old = old[old >= 0]
        if old.shape[0]:
            self.rowid_of[old] = -1
            self.label_of[rowids] = -1
            self.size -= int(old.shape[0])
            _stored(self.index)[old] = 0.0  # nothing of the old vector stays in the graph
        if self.tail.shape[0]:
            self.tail = self.tail[~np.isin(self.tail, rowids)]
        if vectors is not None:
            self.tail = np.concatenate([self.tail, rowids])

    def absorb(self, lock: threading.Lock, current: _Lookup) -> None:
        """Adds the tail to the graph, ``ABSORB_CHUNK`` vectors per hold of ``lock``
        (a search waits for one chunk at most); the caller set ``absorbing``."""
        try:
            while True:
                with lock:
                    if (self.stopped or self.index is None or self.building
                            or self.tail.shape[0] == 0):  # fmt: skip
                        return
                    part, self.tail = self.tail[:ABSORB_CHUNK], self.tail[ABSORB_CHUNK:]
                    alive, vectors = current(part)
                    part = part[alive]
                    if part.shape[0]:
                        first = int(self.index.ntotal)
                        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
                        self.rowid_of = np.concatenate([self.rowid_of, part])
                        self.label_of[part] = np.arange(first, first + part.shape[0])
                        self.size += int(part.shape[0])
        finally:
            with lock:
                self.absorbing = False

    def build(self, rowids: np.ndarray, positions: np.ndarray, rows: np.ndarray,
              lock: threading.Lock, current: _Lookup) -> None:  # fmt: skip
        """Builds and calibrates a graph of a snapshot (``rows[positions[i]]`` is
        ``rowids[i]``'s vector) without the lock, then under it installs it and applies
        what changed meanwhile."""
        started = time.perf_counter()
        try:
            faiss = _faiss()
            threads = faiss.omp_get_max_threads()  # this thread's OpenMP setting, restored
            faiss.omp_set_num_threads(build_threads())
            try:
                index = faiss.IndexHNSWFlat(self.dimensions, LINKS, faiss.METRIC_INNER_PRODUCT)
                index.hnsw.efConstruction = CONSTRUCTION
                snapshot = _Snapshot(rows, positions)
                for start in range(0, rowids.shape[0], _ADD_CHUNK):
                    if self.stopped:
                        raise _Stopped
                    index.add(np.ascontiguousarray(snapshot[start : start + _ADD_CHUNK]))
                if self.stopped:
                    raise _Stopped
                rng = np.random.default_rng(rowids.shape[0])
                breadths = calibrate(index, snapshot, rng) if rowids.shape[0] else self.breadths
            finally:
                faiss.omp_set_num_threads(threads)
        except BaseException as error:
            with lock:  # searches stay as they were; a later wide one builds again
                self._pending = None
                if isinstance(error, _Stopped):
                    return
                if isinstance(error, ImportError):  # never again in this process
                    self.unavailable = True
                    log.warning("the vector graph index is off: faiss did not load (%s)",
                                error)  # fmt: skip
                    return
            raise
        with lock:
            pending, self._pending = self._pending or set(), None
            self.index, self.breadths = index, breadths
            self.built_s = time.perf_counter() - started
            self.calibrated = self.size = int(rowids.shape[0])
            self.rowid_of = rowids.astype(np.int64, copy=True)
            top = int(rowids.max()) + 1 if rowids.shape[0] else 0
            self.label_of = np.full(max(1024, top), -1, dtype=np.int64)
            self.label_of[rowids] = np.arange(rowids.shape[0])
            self.tail = np.zeros(0, dtype=np.int64)
            if pending:  # changed since the snapshot: tombstoned, and the alive re-taken
                changed = np.fromiter(pending, np.int64, len(pending))
                alive, _ = current(changed)
                self.changed(changed, None)
                if alive.any():
                    self.changed(changed[alive], np.zeros(0))

    def breadth_for(self, in_scope: int, limit: int, rows_per_breadth: float = 0) -> int:
        """The calibrated breadth for a scope of ``in_scope`` vectors; 0 when none is,
        or when the scope holds fewer than ``rows_per_breadth`` rows per unit of it
        (exact is then cheaper)."""
        held = self.size + int(self.tail.shape[0])
        depth = _K * max(1.0, limit / _K) * held / max(1, in_scope)
        step = int(np.searchsorted(DEPTHS, depth))
        if step >= len(DEPTHS):
            return 0
        breadth = int(self.breadths[step])
        return 0 if breadth * rows_per_breadth > in_scope else breadth

    def search(self, rowids: np.ndarray, whole: bool, query: np.ndarray, limit: int,
               view: View, rows_per_breadth: float = ROWS_PER_BREADTH,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:  # fmt: skip
        """The candidates among ``rowids`` (the in-scope records with a vector; ``whole``:
        every vector of the matrix): the graph's nearest and the tail's in-scope rows,
        their rows in ``view`` and exact similarities. None when the scope's depth is
        not calibrated or too few are found (the caller scores exactly)."""
        breadth = self.breadth_for(int(rowids.shape[0]), limit, rows_per_breadth)
        if breadth == 0 or self.index is None:
            return None
        want = min(int(rowids.shape[0]), MARGIN * limit)
        selected = None  # a whole scope's tombstones are dropped below (zeroed: far)
        if not whole:
            inside = rowids[rowids < self.label_of.shape[0]]
            selected = self.label_of[inside]
            selected = selected[selected >= 0]
        labels = search_labels(self.index, query[None, :], want, breadth, selected)[0]
        labels = labels[labels >= 0]
        found = self.rowid_of[labels]
        found = found[found >= 0]  # a tombstone (only when unselected) is never offered
        if self.tail.shape[0]:
            tail = self.tail if whole else self.tail[np.isin(self.tail, rowids)]
            found = np.concatenate([found, tail])
        found, positions = view.locate(found)
        if found.shape[0] < min(limit, int(rowids.shape[0])):
            return None
        return found, positions, gathered_scores(view.rows, positions, query)


def _stored(index: Any) -> np.ndarray:
    """The graph's stored vectors, as a writable view (faiss's flat storage)."""
    faiss = _faiss()
    storage = faiss.downcast_index(index.storage)
    return faiss.rev_swig_ptr(storage.get_xb(), index.ntotal * index.d).reshape(
        index.ntotal, index.d
    )


class _Snapshot:
    """Rows of a snapshot in rowid order, read lazily (``rows[positions[i]]``)."""

    def __init__(self, rows: np.ndarray, positions: np.ndarray) -> None:
        self.rows, self.positions = rows, positions
        self.shape = (positions.shape[0], rows.shape[1])

    def __getitem__(self, key: Any) -> np.ndarray:
        return np.asarray(self.rows[self.positions[key]], dtype=np.float32)


if TYPE_CHECKING:
    from collections.abc import Callable

    from erstwhile.store.sqlite.matrix_view import View

    #: rowids -> (which still have a vector, their vectors)
    _Lookup = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

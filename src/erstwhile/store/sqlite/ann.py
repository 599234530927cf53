"""The wide-scope index of the SQLite vector lane: an inverted file (IVF) over one
embedder's vectors, answering a search whose scope is large and wide until the graph
index (:mod:`erstwhile.store.sqlite.graph_index`) is built, and saved with the matrix
so that a fresh process has an index while it builds its graph.

Exact cosine over the in-scope rows costs a pass over them; for a scope of most of a
large store that is a pass over the whole matrix. Above ``MIN_ROWS`` in-scope vectors
holding at least ``MIN_SHARE`` of the index, the lane asks the index instead. The
index splits the vectors into about √n lists by k-means (each vector belongs to the
list of its nearest centroid); a search scores the centroids, takes the members of the
nearest lists that are in the scope (the same scope the exact path scores, decided
before), probes further lists while too few are found, and the caller rescores the
kept ones exactly from the matrix, so every score is the exact cosine. When every list
is probed and the scope's best ``limit`` are still not there, the search falls back to
exact. Below the thresholds the search is exact. Hits found through the index say so
in their ``semantic`` signal (``"index": "ivf"``).

Once a build is done, the matrix lays its rows out in the lists' order, each list
one run of rows (``_Matrix.regroup``; a saved copy keeps that order), so a probe
scores a list's run in one pass instead of gathering its rows from all over the
matrix (at 100k x 384 an unfiltered search took 1.41 ms instead of 2.09, in-process
p50): the rows of a run whose vector changed since (moved to another list, or
withdrawn) are dropped from it, and a list's members outside its run (added or moved
since) are gathered, until the next build lays the rows out again.

How many lists a search probes is not tuned on any benchmark's queries: each build
calibrates it on the store's own vectors (``calibrate``: stored vectors with noise as
queries, their exact neighbours by a full pass), per search depth, to a mean recall of
``TARGET`` with a floor of ``PROBES_MIN`` lists.

The index is a copy, like the matrix it is built from (SPEC §12: rebuilt from the
file, never a second truth): every vector the matrix takes goes to the list of its
nearest centroid, a withdrawn one leaves its list, a build runs in a background thread
while searches stay exact, and the changes made meanwhile are applied when it is done.
Once the store has grown ``RETRAIN_GROWTH`` times past the size the lists were trained
on, a new build retrains them (the old index serves until it is done).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from erstwhile.store.sql.scoring import gathered_scores

# The switch, measured (``python -m bench.crossover``, bench/results/crossover_*.json:
# CPU p50 of the lane once the scope is decided, random scopes, recall@10 against
# exact). At 100k vectors the index costs 0.79x exact at a tenth of the store (10k
# rows), 0.13x at 15 % and 0.25x for every row, recall 0.97-1.00; over 11k vectors
# 1.17x for every row (the bench's 10k store has clusters of 11: 56 of 100 lists are
# probed).
# Kept at 10,000 (reviewed with the exact path's whole-matrix pass): at 100k the index
# wins from a 10k-row scope (0.79x) and loses at 5k (1.12x), so the crossover is just
# under it; an 11k-vector store pays 1.17x for its full scope (about 0.1 ms), which a
# higher bound would save at the price of 100k's 10k-15k-row scopes (1.3x exact).
#: Fewer in-scope vectors than this: exact.
MIN_ROWS = 10_000
#: A scope holding less than this share of the index: exact (the index would have to
#: probe many lists to find ``limit`` in the scope).
MIN_SHARE = 0.15
#: A scope under ``MIN_SHARE`` still goes through the index when the build's calibration
#: says its depth needs at most this share of the lists probed (at 100k, probing 48 %
#: of them cost 0.79x exact, 65 % 1.12x; bench/results/crossover_100k.json).
MAX_PROBED = 0.25
#: The mean recall of the true neighbours a calibrated probe count reaches.
TARGET = 0.97
#: Never fewer lists probed than this (a calibration is a sample). Each list probed at
#: 1M is ~1,000 rows gathered and scored: 8 lists cost ~3 ms of an unfiltered search.
PROBES_MIN = 4
#: Candidates a search wants in its scope before it stops probing: this times the limit.
MARGIN = 2
#: A probe scores its lists' runs of rows whole, then drops the rows out of scope,
#: when at least this share of them is in scope; else it gathers the in-scope rows
#: (a contiguous pass costs about half a gather per row: measured on 100k x 384).
RUN_SHARE = 0.5
#: Retrain (build anew) once the index holds this many times the vectors trained on.
RETRAIN_GROWTH = 2.0
_SAMPLE_PER_LIST = 64  # k-means trains on this many vectors per list at most
_ITERATIONS = 6
_QUERIES = 200  # calibration queries
_NOISE = 1.5  # their noise, as a share of a unit vector's norm (cosine ≈ 0.55 to it)
#: The search depths (limit / share) a build calibrates a probe count for.
DEPTHS = (10, 20, 40, 80, 160, 320, 640)
_CHUNK = 65536


def list_count(vectors: int) -> int:
    """About √n lists (a search probes a few lists of about √n vectors each)."""
    return max(1, min(4096, round(math.sqrt(vectors))))


def train(sample: np.ndarray, lists: int, rng: np.random.Generator) -> np.ndarray:
    """Unit centroids of ``lists`` spherical k-means clusters of ``sample``'s rows."""
    centroids = sample[rng.choice(sample.shape[0], lists, replace=False)].copy()
    for _ in range(_ITERATIONS):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        order = np.argsort(nearest, kind="stable")
        sizes = np.bincount(nearest, minlength=lists)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        filled = sizes > 0
        sums = np.add.reduceat(sample[order], starts[filled], axis=0)
        centroids[filled] = sums
        empty = np.flatnonzero(~filled)  # reseeded from the sample
        centroids[empty] = sample[rng.choice(sample.shape[0], empty.shape[0])]
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        centroids /= np.maximum(norms, 1e-12)
    return centroids.astype(np.float32)


def assign(vectors: np.ndarray | _Snapshot, centroids: np.ndarray) -> np.ndarray:
    """Each vector's nearest centroid."""
    out = np.empty(vectors.shape[0], dtype=np.int32)
    for start in range(0, vectors.shape[0], _CHUNK):
        out[start : start + _CHUNK] = np.argmax(vectors[start : start + _CHUNK] @ centroids.T, 1)
    return out


def calibrate(
    rows: np.ndarray | _Snapshot, lists: np.ndarray, centroids: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The lists to probe for each of ``DEPTHS``: the fewest whose members hold, on
    average, ``TARGET`` of a query's true nearest ``depth`` vectors (queries: stored
    vectors plus noise; truth: a full exact pass; ``lists[i]`` is ``rows[i]``'s list)."""
    count = rows.shape[0]
    picks = rng.choice(count, min(_QUERIES, count), replace=False)
    noise = rng.normal(size=(picks.shape[0], rows.shape[1])).astype(np.float32)
    queries = rows[np.sort(picks)] + _NOISE * noise / math.sqrt(rows.shape[1])
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    deepest = min(DEPTHS[-1], count)
    best_scores = np.full((queries.shape[0], 0), -np.inf, dtype=np.float32)
    best = np.zeros((queries.shape[0], 0), dtype=np.int64)
    for start in range(0, count, _CHUNK):  # a running exact top ``deepest``
        scores = np.concatenate([best_scores, queries @ rows[start : start + _CHUNK].T], 1)
        index = np.concatenate(
            [best, np.broadcast_to(np.arange(start, min(count, start + _CHUNK)),
                                   (queries.shape[0], min(count, start + _CHUNK) - start))],
            1,
        )  # fmt: skip
        keep = np.argpartition(-scores, deepest - 1, axis=1)[:, :deepest]
        best_scores = np.take_along_axis(scores, keep, 1)
        best = np.take_along_axis(index, keep, 1)
    order = np.argsort(-best_scores, axis=1)
    best = np.take_along_axis(best, order, 1)
    # the rank of each list by the query's centroid score (0: probed first)
    by_score = np.argsort(-(queries @ centroids.T), axis=1)
    rank = np.empty_like(by_score)
    np.put_along_axis(rank, by_score, np.arange(centroids.shape[0])[None, :], 1)
    needed = np.take_along_axis(rank, lists[best].astype(np.int64), 1)  # probes to reach each
    probes = []
    for depth in DEPTHS:
        ranks = needed[:, : min(depth, deepest)]
        # recall at p probes is the share of ranks < p: the TARGET quantile, plus one
        reach = int(np.quantile(ranks, TARGET, method="higher")) + 1
        probes.append(min(centroids.shape[0], max(PROBES_MIN, reach)))
    return np.maximum.accumulate(np.asarray(probes, dtype=np.int64))


class ListIndex:
    """The IVF copy of one matrix, keyed by record rowid. Every method but ``build``
    is called with the vector cache's lock held."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.centroids: np.ndarray | None = None
        self.members: list[np.ndarray] = []  # each list's rowids
        self.where = np.full(0, -1, dtype=np.int32)  # rowid -> its list, -1 = none
        self.probes = np.zeros(len(DEPTHS), dtype=np.int64)  # by depth, calibrated
        self.trained = 0  # vectors the lists were trained on
        self.size = 0  # vectors in the lists
        self._pending: set[int] | None = None  # rowids changed while a build runs
        # Once the matrix holds the lists in runs of rows (``grouped``): where each
        # list's run starts and ends in matrix layout ``layout``, which rowids still
        # sit in their list's run (``in_run``, by rowid), and each list's members
        # outside it (``extra``: added or moved since), which are gathered.
        self.runs: np.ndarray | None = None
        self.layout = -1
        self.in_run = np.zeros(0, dtype=bool)
        self.extra: list[np.ndarray] = []

    @property
    def ready(self) -> bool:
        return self.centroids is not None

    @property
    def building(self) -> bool:
        return self._pending is not None

    def due(self) -> bool:
        """True when the store has outgrown the lists' training: a retrain is due."""
        return self.ready and not self.building and self.size > RETRAIN_GROWTH * self.trained

    def start(self) -> bool:
        """Marks a build as begun; False when one is running, or done and not due."""
        if self._pending is not None or (self.ready and not self.due()):
            return False
        self._pending = set()
        return True

    def changed(self, rowids: np.ndarray, vectors: np.ndarray | None) -> None:
        """The matrix took ``vectors`` for ``rowids`` (None: withdrew them)."""
        if self._pending is not None:
            self._pending.update(rowids.tolist())
        if self.centroids is None:
            return
        if vectors is not None:  # the last vector of a rowid wins, as in the matrix
            _, last = np.unique(rowids[::-1], return_index=True)
            chosen = rowids.shape[0] - 1 - last
            rowids, vectors = rowids[chosen], vectors[chosen]
        else:
            rowids = np.unique(rowids)
        top = int(rowids.max()) if rowids.shape[0] else -1
        if top >= self.where.shape[0]:
            grown = np.full(max(top + 1, 2 * self.where.shape[0]), -1, dtype=np.int32)
            grown[: self.where.shape[0]] = self.where
            self.where = grown
        old = self.where[rowids]
        self.where[rowids] = -1
        if self.runs is not None:  # a changed vector is read from where it is now
            self.in_run[rowids[rowids < self.in_run.shape[0]]] = False
        for list_id in np.unique(old[old >= 0]).tolist():
            held = self.members[list_id]
            self.members[list_id] = held[self.where[held] == list_id]
            if self.runs is not None:
                held = self.extra[list_id]
                self.extra[list_id] = held[self.where[held] == list_id]
        self.size -= int(np.count_nonzero(old >= 0))
        if vectors is None or rowids.shape[0] == 0:
            return
        nearest = assign(vectors, self.centroids)
        self.where[rowids] = nearest
        order = np.argsort(nearest, kind="stable")
        ids, starts = np.unique(nearest[order], return_index=True)
        for list_id, part in zip(ids.tolist(), np.split(rowids[order], starts[1:]), strict=True):
            self.members[list_id] = np.concatenate([self.members[list_id], part])
            if self.runs is not None:
                self.extra[list_id] = np.concatenate([self.extra[list_id], part])
        self.size += int(rowids.shape[0])

    def build(self, rowids: np.ndarray, positions: np.ndarray, rows: np.ndarray,
              lock: threading.Lock, current: _Lookup) -> None:  # fmt: skip
        """Trains, fills and calibrates the lists from a snapshot (``rows[positions[i]]``
        is ``rowids[i]``'s vector) without the lock, then under it applies what changed
        meanwhile (a rewritten row may have been read either way: it is among them)."""
        try:
            rng = np.random.default_rng(rowids.shape[0])
            lists = list_count(rowids.shape[0])
            sample = rng.choice(rowids.shape[0], min(rowids.shape[0], _SAMPLE_PER_LIST * lists),
                                replace=False)  # fmt: skip
            snapshot = _Snapshot(rows, positions)
            centroids = train(snapshot[np.sort(sample)], lists, rng)
            nearest = assign(snapshot, centroids)  # a chunk of rows gathered at a time
            probes = calibrate(snapshot, nearest, centroids, rng)
            members = _group(rowids, nearest, lists)
        except BaseException:
            with lock:  # searches stay as they were; the next wide one starts a build again
                self._pending = None
            raise
        with lock:
            pending, self._pending = self._pending or set(), None
            self.install(centroids, members, probes, int(rowids.shape[0]))
            if pending:
                changed = np.fromiter(pending, np.int64, len(pending))
                alive, vectors = current(changed)
                self.changed(changed[~alive], None)
                if alive.any():
                    self.changed(changed[alive], vectors)

    def install(self, centroids: np.ndarray, members: list[np.ndarray], probes: np.ndarray,
                trained: int) -> None:  # fmt: skip
        """Takes trained lists (a build's or a saved copy's) in place of any held."""
        top = max((int(m.max()) for m in members if m.shape[0]), default=-1)
        where = np.full(max(1024, top + 1), -1, dtype=np.int32)
        for list_id, held in enumerate(members):
            where[held] = list_id
        self.centroids, self.members, self.where = centroids, members, where
        self.probes, self.trained = probes, trained
        self.size = sum(int(m.shape[0]) for m in members)
        self.runs, self.layout, self.extra = None, -1, []  # the rows are not in these lists' runs
        self.in_run = np.zeros(0, dtype=bool)

    def grouped(self, position: np.ndarray, layout: int, runs: np.ndarray) -> None:
        """The matrix (``position``: rowid -> row, of layout ``layout``) now holds list
        ``i``'s vectors in rows ``runs[i]:runs[i + 1]``, except members found elsewhere
        (moved or added later), which are gathered."""
        assert self.centroids is not None
        sizes = np.asarray([m.shape[0] for m in self.members], dtype=np.int64)
        held = np.concatenate(self.members) if self.members else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(self.members)), sizes)
        at = position[held]
        inside = (at >= runs[owner]) & (at < runs[owner + 1])
        # one slot past every rowid: a withdrawn row's rowid (-1) reads it, never True
        self.in_run = np.zeros(max(1024, self.where.shape[0]) + 1, dtype=bool)
        self.in_run[held[inside]] = True
        outside = ~inside
        self.extra = np.split(held[outside], np.cumsum(np.bincount(owner[outside],
                              minlength=len(self.members)))[:-1])  # fmt: skip
        self.runs, self.layout = runs, layout

    def probes_for(self, in_scope: int, limit: int) -> int:
        """How many lists a search of a scope of ``in_scope`` vectors probes first: the
        calibrated count for the depth its best ``limit`` rank at in the whole index."""
        assert self.centroids is not None
        depth = limit * self.size / max(1, in_scope)
        step = min(len(DEPTHS) - 1, int(np.searchsorted(DEPTHS, depth)))
        probes = int(self.probes[step])
        if depth > DEPTHS[-1]:  # deeper than calibrated: more lists, by the same ratio
            probes = math.ceil(probes * depth / DEPTHS[-1])
        return min(self.centroids.shape[0], probes)

    def pays(self, in_scope: int, limit: int) -> bool:
        """True when a scope narrower than ``MIN_SHARE`` is still worth searching here:
        its calibrated probes cover at most ``MAX_PROBED`` of the lists."""
        assert self.centroids is not None
        return self.probes_for(in_scope, limit) <= MAX_PROBED * self.centroids.shape[0]

    def search(
        self, member: np.ndarray | None, in_scope: int, query: np.ndarray, limit: int,
        view: View,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:  # fmt: skip
        """The candidates in the scope (``member[rowid]``; None: every vector), the
        in-scope members of the lists probed: their rowids, their rows in ``view``, and
        their similarities to ``query`` when the lists lie in runs of ``view``'s rows
        (each run scored in one pass, no gather; else None: the caller gathers). None
        when even every list holds fewer than the scope's ``limit`` (the caller then
        scores exactly)."""
        assert self.centroids is not None
        if self.size == 0:
            return None
        lists = self.centroids.shape[0]
        probes = self.probes_for(in_scope, limit)
        if 2 * probes >= lists:  # half the lists cost about what all do: miss nothing
            probes = lists
        order = np.argsort(-(self.centroids @ query))
        want = min(in_scope, MARGIN * limit)
        in_runs = self.runs is not None and self.layout == view.layout
        taken = 0
        keys: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        count = 0
        while True:
            chosen = order[taken:probes]
            if in_runs:
                held, at, scored = self._probe(chosen, member, query, view)
                scores.append(scored)
            else:
                held = np.concatenate([self.members[i] for i in chosen.tolist()])
                held, at = view.locate(held if member is None else in_scope_of(held, member))
            keys.append(held)
            rows.append(at)
            count += held.shape[0]
            taken = probes
            if count >= want or taken >= lists:
                break
            probes = min(lists, 2 * probes)
        if count < min(limit, in_scope):
            return None
        return np.concatenate(keys), np.concatenate(rows), (
            np.concatenate(scores) if in_runs else None)  # fmt: skip

    def _probe(
        self, chosen: np.ndarray, member: np.ndarray | None, query: np.ndarray, view: View
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The in-scope members of lists ``chosen``, scored: each list's run of rows in
        one pass (the rows of a run no longer its list's, or out of scope, dropped), and
        its members outside the run gathered."""
        assert self.runs is not None
        starts, stops = self.runs[chosen], self.runs[chosen + 1]
        spans = list(zip(starts.tolist(), stops.tolist(), strict=True))
        at = np.concatenate([np.arange(a, b) for a, b in spans])
        keys = view.rowid_of[at]
        kept = self.in_run[keys]  # a withdrawn row's -1 reads the spare slot: False
        if member is not None:
            kept &= member[keys]
        if member is None or np.count_nonzero(kept) >= RUN_SHARE * kept.shape[0]:
            # whole runs, then the kept
            scores = np.concatenate([view.rows[a:b] @ query for a, b in spans])[kept]
            keys, at = keys[kept], at[kept]
        else:  # few of the runs' rows in scope: gather those (rows near each other)
            keys, at = keys[kept], at[kept]
            scores = gathered_scores(view.rows, at, query)
        extra = np.concatenate([self.extra[i] for i in chosen.tolist()])
        extra, extra_at = view.locate(extra if member is None else in_scope_of(extra, member))
        if extra.shape[0]:
            keys = np.concatenate([keys, extra])
            at = np.concatenate([at, extra_at])
            scores = np.concatenate([scores, gathered_scores(view.rows, extra_at, query)])
        return keys, at, scores


def in_scope_of(rowids: np.ndarray, member: np.ndarray) -> np.ndarray:
    """The rowids ``member`` marks (a rowid past it, of a vector a refresh took after the
    search's view was read, is not in the search's scope)."""
    if rowids.shape[0] and int(rowids.max()) >= member.shape[0]:
        rowids = rowids[rowids < member.shape[0]]
    return rowids[member[rowids]]


class _Snapshot:
    """Rows of a snapshot in rowid order, read lazily (``rows[positions[i]]``): a
    calibration reads them in chunks instead of copying the whole matrix."""

    def __init__(self, rows: np.ndarray, positions: np.ndarray) -> None:
        self.rows, self.positions = rows, positions
        self.shape = (positions.shape[0], rows.shape[1])

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.rows[self.positions[key]]


def _group(rowids: np.ndarray, nearest: np.ndarray, lists: int) -> list[np.ndarray]:
    order = np.argsort(nearest, kind="stable")
    bounds = np.searchsorted(nearest[order], np.arange(lists + 1))
    grouped = rowids[order]
    return [grouped[bounds[i] : bounds[i + 1]].copy() for i in range(lists)]


if TYPE_CHECKING:
    from collections.abc import Callable

    from erstwhile.store.sqlite.matrix_view import View

    #: rowids -> (which still have a vector, their vectors)
    _Lookup = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

"""The wide-scope index of the SQLite vector lane: an HNSW graph (usearch) over one
embedder's vectors, answering a search whose scope is large and wide.

Exact cosine over the in-scope rows costs a pass over them; for a scope of most of a
large store that is a pass over the whole matrix. Above ``MIN_ROWS`` in-scope vectors
holding at least ``MIN_SHARE`` of the index, the lane asks the graph instead for the
nearest vectors of the whole store, keeps those in the scope (the same scope the exact
path scores, decided before), asks deeper when too few are in it, and rescores the
kept ones exactly from the matrix, so every score is the exact cosine. When even a
deep ask finds fewer than the scope's best ``limit``, the search falls back to exact.
Below the thresholds the search is exact. Hits found through the graph say so in their
``semantic`` signal (``"index": "hnsw"``).

The graph is a copy, like the matrix it is built from (SPEC §12: rebuilt from the
file, never a second truth): every vector the matrix takes or withdraws is applied to
it, a build runs in a background thread while searches stay exact, and the changes
made meanwhile are applied when it is done.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from usearch.index import Index

# The switch, measured (``python -m bench.crossover``, bench/results/crossover_*.json:
# CPU p50 of the lane once the scope is decided, random scopes, recall@10 against
# exact). At 100k vectors the graph costs 1.16x exact at a tenth of the store (10k
# rows), 0.52x at 15 % and 0.085x for every row, recall 0.96-0.99; over 11k vectors
# 1.02x at half of them, 0.93x for every row, 1.7x at a quarter.
#: Fewer in-scope vectors than this: exact.
MIN_ROWS = 10_000
#: A scope holding less than this share of the index: exact (the graph would have to
#: be asked for many times ``limit`` neighbours to find ``limit`` in the scope).
MIN_SHARE = 0.15
# Measured on the bench's 100k clustered vectors (recall@10 of the graph alone, p50 of
# one search, built with expansion_add 128): ef 32 1.00 / 1.07 ms, ef 64 1.00 / 1.6 ms;
# i8 vectors lost recall (0.90), f16 halved memory at the same recall. That build took
# 25 min of wall time on 2 loaded cores, so expansion_add is 40 here (on 20k noisier
# vectors: 5.8 CPU s per 10k inserted, graph recall@10 0.90 before exact rescoring).
# At 100k (bench/results/crossover_100k.json, this build): ef 48 / 64 / 96 gave
# recall@10 0.93 / 0.96 / 0.99 for the whole store at 1.44 / 1.63 / 1.87 ms CPU.
CONNECTIVITY = 16
EXPANSION_ADD = 40
EXPANSION_SEARCH = 64
_BUILD_CHUNK = 65536
_DEEPER = 4  # each retry asks for this many times more neighbours
_RETRIES = 3
_PARTIAL = 10


def fetch_count(limit: int, share: float) -> int:
    """How many neighbours to ask the graph for, to find ``limit`` in a scope holding
    ``share`` of its vectors: twice the limit for the whole store, and ``_PARTIAL``
    times the limit per share left out (a scope's best ``limit`` rank about
    ``limit / share`` deep in the store, and the graph's deeper ranks are rougher).
    Measured on 10k clustered vectors (recall@10 after exact rescoring, random scopes):
    share 0.5 asked 40 / 80 / 160 deep: 0.90 / 0.91 / 0.95; share 0.25 asked 80 / 160
    / 320: 0.80 / 0.89 / 0.98 (bench/README.md, "wide scopes")."""
    return 2 * limit + math.ceil(_PARTIAL * limit * (1.0 / share - 1.0))


def _new_index(dimensions: int) -> Index:
    # onnxruntime first: once usearch's compiled module is loaded, importing onnxruntime
    # (the default local embedder's runtime) kills the process with SIGSEGV (usearch
    # 2.26.6, onnxruntime 1.32.0); in the other order both work. Both are core
    # dependencies, and a process may embed its first query after its first wide search.
    import onnxruntime  # noqa: F401
    from usearch.index import Index  # imported on first use: a CLI call never loads it

    return Index(
        ndim=dimensions, metric="ip", dtype="f32", connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH,
    )  # fmt: skip


def open_index(path: str, dimensions: int, *, view: bool = False) -> Index:
    """A saved graph, read into memory (it is changed in place as vectors change), or
    (``view``) mapped read-only from the file: ready at once, but never to be changed
    (usearch refuses an add to a view, and a remove from one crashes)."""
    index = _new_index(dimensions)
    if view:
        index.view(path)
    else:
        index.load(path)
    if index.ndim != dimensions:
        raise ValueError(f"{path} holds a graph of {index.ndim} dimensions")
    return index


class GraphIndex:
    """The HNSW copy of one matrix, keyed by record rowid. Every method but ``build``
    is called with the vector cache's lock held."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.index: Index | None = None
        self._pending: set[int] | None = None  # rowids changed while a build runs
        # A fresh process's saved graph, mapped read-only until a loaded copy replaces
        # it (loading a graph costs seconds at 100k; mapping it, milliseconds), and
        # the rowids changed since it was saved (searched exactly beside it).
        self.view: Index | None = None
        self.saved: str | None = None
        self._stale: set[int] = set()
        self.loading = False  # a promote is running

    @property
    def ready(self) -> bool:
        return self.index is not None or self.view is not None

    @property
    def building(self) -> bool:
        return self._pending is not None

    @property
    def stale(self) -> int:
        """How many vectors changed since the mapped graph was saved."""
        return len(self._stale)

    def adopt(self, path: str) -> None:
        """Starts from a saved graph: mapped now, loaded (changeable) by ``promote``."""
        self.view = open_index(path, self.dimensions, view=True)
        self.saved = path

    def promote(self, lock: threading.Lock, current: _Lookup) -> None:
        """Replaces the mapped graph with a loaded copy (without the lock), then under
        it applies every change made since the graph was saved."""
        path = self.saved
        if path is None:
            return
        try:
            index = open_index(path, self.dimensions)
        except (OSError, RuntimeError, ValueError):  # gone or unreadable: built anew later
            index = None
        with lock:
            if self.saved != path:
                return
            view, self.view, self.saved = self.view, None, None
            stale, self._stale = self._stale, set()
            del view  # searches hold the lock: none is using it now
            if index is None:
                return
            self.index = index
            if stale:
                changed = np.fromiter(stale, np.int64, len(stale))
                alive, vectors = current(changed)
                self.changed(changed[~alive], None)
                if alive.any():
                    self.changed(changed[alive], vectors)

    def changed(self, rowids: np.ndarray, vectors: np.ndarray | None) -> None:
        """The matrix took ``vectors`` for ``rowids`` (None: withdrew them)."""
        if self._pending is not None:
            self._pending.update(rowids.tolist())
        if self.index is None:
            if self.view is not None:
                self._stale.update(rowids.tolist())
            return
        keys = np.unique(rowids).astype(np.uint64)
        present = np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)
        if present.any():
            self.index.remove(keys[present])
        if vectors is not None:
            # the last vector of a rowid wins, as in the matrix
            _, last = np.unique(rowids[::-1], return_index=True)
            chosen = rowids.shape[0] - 1 - last
            self.index.add(rowids[chosen].astype(np.uint64), vectors[chosen], threads=1)

    def start(self) -> bool:
        """Marks a build as begun; False when one is running or done (or a saved graph
        is mapped) already."""
        if self.index is not None or self.view is not None or self._pending is not None:
            return False
        self._pending = set()
        return True

    def build(self, rowids: np.ndarray, positions: np.ndarray, rows: np.ndarray,
              lock: threading.Lock, current: _Lookup) -> None:  # fmt: skip
        """Builds the graph from a snapshot (``rows[positions[i]]`` is ``rowids[i]``'s
        vector) without the lock, then under it applies what changed meanwhile (a
        rewritten row may have been read either way: it is among the changes)."""
        try:
            index = _new_index(self.dimensions)
            for start in range(0, rowids.shape[0], _BUILD_CHUNK):
                stop = start + _BUILD_CHUNK
                index.add(rowids[start:stop].astype(np.uint64), rows[positions[start:stop]],
                          threads=0)  # fmt: skip
        except BaseException:
            with lock:  # searches stay exact; the next wide one starts a build again
                self._pending = None
            raise
        with lock:
            pending, self._pending = self._pending or set(), None
            self.index = index
            if pending:
                changed = np.fromiter(pending, np.int64, len(pending))
                alive, vectors = current(changed)
                self.changed(changed[~alive], None)
                if alive.any():
                    self.changed(changed[alive], vectors)

    def search(
        self, member: np.ndarray | None, in_scope: int, query: np.ndarray, limit: int
    ) -> np.ndarray | None:
        """Rowids of candidates in the scope (``member[rowid]``; None: every vector),
        at least the scope's ``limit`` best by the graph, or None when the graph cannot
        find enough of them (the caller then scores exactly)."""
        graph = self.index if self.index is not None else self.view
        assert graph is not None
        size = len(graph)
        if size == 0:
            return None
        share = min(1.0, in_scope / size)
        count = min(size, fetch_count(limit, share))
        stale = None
        if self.index is None and self._stale:  # the view lacks these: scored exactly
            stale = np.fromiter(self._stale, np.int64, len(self._stale))
            assert member is not None  # the caller marks the scope while a view serves
            stale = stale[stale < member.shape[0]]
            stale = stale[member[stale]]
        for _ in range(_RETRIES):
            found = graph.search(query, count, threads=1)
            keys = np.asarray(found.keys, dtype=np.int64)
            if member is not None:
                keys = keys[keys < member.shape[0]]
                keys = keys[member[keys]]
            if stale is not None:
                keys = np.union1d(keys, stale)
            if keys.shape[0] >= min(limit, in_scope) or count >= size:
                return keys if keys.shape[0] >= min(limit, in_scope) else None
            count = min(size, count * _DEEPER)
        return None


if TYPE_CHECKING:
    from collections.abc import Callable

    #: rowids -> (which still have a vector, their vectors)
    _Lookup = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

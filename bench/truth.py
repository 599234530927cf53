"""Ground truth and the floor: exact answers computed in numpy, outside any engine.

- semantic: float64 cosine over exactly the in-scope rows.
- lexical: BM25 as SQLite FTS5 computes it (k1 = 1.2, b = 0.75; idf = ln((N - n + 0.5)
  / (n + 0.5)), floored at 1e-6; N, n and the mean length over the whole table), for an
  OR of the query's words, over the in-scope rows. Recall counts a hit as right when
  its exact score reaches the 10th best (ties at the boundary are all right).
- hybrid: RRF (k = 60) of the exact lexical and exact semantic top-50 of the scope.

The floor is the same computation in float32 over the in-scope row indices, which are
precomputed: what a perfect engine that already knew the scope would spend.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from bench.synth import VOCABULARY, SpeedData

K1 = 1.2
B = 0.75
RRF_K = 60
LANE_DEPTH = 50


class Bm25:
    """FTS5's BM25 as a documents x words impact matrix (CSC, one column per word)."""

    def __init__(self, data: SpeedData) -> None:
        rows = np.repeat(np.arange(data.size), [len(t) for t in data.terms])
        cols = np.concatenate(data.terms)
        tf = sparse.csr_matrix(
            (np.ones(cols.shape[0]), (rows, cols)), shape=(data.size, VOCABULARY)
        )
        tf.sum_duplicates()
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        mean_length = lengths.mean()
        df = np.bincount(tf.indices, minlength=VOCABULARY)
        n = data.size
        idf = np.log((n - df + 0.5) / (df + 0.5))
        idf[idf <= 0] = 1e-6
        coo = tf.tocoo()
        norm = K1 * (1 - B + B * lengths[coo.row] / mean_length)
        impact = idf[coo.col] * coo.data * (K1 + 1) / (coo.data + norm)
        self.impacts = sparse.csc_matrix((impact, (coo.row, coo.col)), shape=tf.shape)
        self.impacts32 = self.impacts.astype(np.float32)

    def scores(self, terms: list[int], rows: np.ndarray, *, exact: bool = True) -> np.ndarray:
        """Scores of ``rows`` (0 for rows matching no word)."""
        matrix = self.impacts if exact else self.impacts32
        summed = np.asarray(matrix[:, terms].sum(axis=1)).ravel()
        return summed[rows]

    def matches(self, terms: list[int], rows: np.ndarray) -> np.ndarray:
        hit = np.asarray((self.impacts[:, terms] != 0).sum(axis=1)).ravel() > 0
        return hit[rows]


def top(scores: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best rows by score, best first, ties by row index."""
    if scores.shape[0] > k:
        cut = np.argpartition(-scores, k - 1)[:k]
        kth = scores[cut].min()
        cut = np.flatnonzero(scores >= kth)
    else:
        cut = np.arange(scores.shape[0])
    order = np.lexsort((rows[cut], -scores[cut]))
    return rows[cut[order]][:k]


def semantic_top(
    data: SpeedData, x64: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int
) -> np.ndarray:
    return top(x64[rows] @ query.astype(np.float64), rows, k)


def lexical_top(bm25: Bm25, terms: list[int], rows: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """The best ``k`` matching rows, and the score a hit needs to count as right."""
    hit = bm25.matches(terms, rows)
    scored = rows[hit]
    scores = bm25.scores(terms, scored)
    best = top(scores, scored, k)
    if best.shape[0] == 0:
        return best, np.inf
    threshold = float(np.sort(scores)[::-1][min(k, scores.shape[0]) - 1])
    return best, threshold


def rrf(lanes: list[list[int]], k: int = RRF_K) -> list[int]:
    scores: dict[int, float] = {}
    for lane in lanes:
        for rank, item in enumerate(lane, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return [i for i, _ in sorted(scores.items(), key=lambda p: (-p[1], p[0]))]


def hybrid_top(
    data: SpeedData,
    x64: np.ndarray,
    bm25: Bm25,
    rows: np.ndarray,
    query: np.ndarray,
    terms: list[int],
    k: int,
) -> np.ndarray:
    lexical, _ = lexical_top(bm25, terms, rows, LANE_DEPTH)
    semantic = semantic_top(data, x64, rows, query, LANE_DEPTH)
    return np.array(rrf([lexical.tolist(), semantic.tolist()])[:k], dtype=np.int64)


# -- the floor: float32, precomputed scope ---------------------------------------------


#: Below this share of the rows, gathering them first is cheaper than scoring all.
GATHER_SHARE = 0.25


def floor_semantic(x: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The top k of ``rows`` by dot product, the cheapest honest way: every row is one
    contiguous matvec; a narrow scope gathers its rows first; a wide one scores the
    whole matrix in one pass and picks its rows (cheaper than copying most of it)."""
    if rows.shape[0] == x.shape[0]:
        scores = x @ query  # rows is every row, in order
    elif rows.shape[0] < GATHER_SHARE * x.shape[0]:
        scores = x[rows] @ query
    else:
        scores = (x @ query)[rows]
    if scores.shape[0] > k:
        best = np.argpartition(scores, -k)[-k:]
        return rows[best[np.argsort(-scores[best])]]
    return rows[np.argsort(-scores)]


def floor_lexical(bm25: Bm25, terms: list[int], rows: np.ndarray, k: int) -> np.ndarray:
    scores = bm25.scores(terms, rows, exact=False)
    if scores.shape[0] > k:
        best = np.argpartition(scores, -k)[-k:]
        best = best[scores[best] > 0]
        return rows[best[np.argsort(-scores[best])]]
    return rows[np.argsort(-scores)]


def floor_hybrid(
    x: np.ndarray, bm25: Bm25, rows: np.ndarray, query: np.ndarray, terms: list[int], k: int
) -> np.ndarray:
    lexical = floor_lexical(bm25, terms, rows, LANE_DEPTH)
    semantic = floor_semantic(x, rows, query, LANE_DEPTH)
    return np.array(rrf([lexical.tolist(), semantic.tolist()])[:k], dtype=np.int64)

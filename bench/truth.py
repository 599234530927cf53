"""Ground truth and the floor: exact answers computed in numpy, outside any engine.

- semantic: float64 cosine over exactly the in-scope rows.
- lexical: BM25 as erstwhile defines it (``erstwhile.store.sql.lexical``): the words
  are erstwhile's terms (English stop words dropped, Snowball stems; a made-up word can
  be a stop word or share a stem with another), k1 = 1.2, b = 0.75, idf = ln(1 + (N - n
  + 0.5) / (n + 0.5)), N, n and the mean length over the namespace (the whole table),
  each term's part cut to a whole 1e-9, for an OR of the query's terms, over the
  in-scope rows. Recall counts a hit as right when its exact score reaches the 10th
  best (ties at the boundary are all right).
- hybrid: the product's fusion (``erstwhile.domain.fusion``: RRF with k = RRF_K, the
  coverage bonus for the lexical hits holding the most of the query's terms, ties by
  closeness to each lane's best score, then by row) of the exact lexical and exact
  semantic top-50 of the scope.

The floor is the same computation in float32 over the in-scope row indices, which are
precomputed: what a perfect engine that already knew the scope would spend.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from bench.synth import SpeedData
from erstwhile.domain.fusion import RRF_K as FUSION_K
from erstwhile.domain.fusion import reciprocal_rank_fusion
from erstwhile.domain.words import DEFAULT_LANGUAGE, terms
from erstwhile.store.sql.scoring import gathered_scores

K1 = 1.2
B = 0.75
SCALE = 1e9
RRF_K = FUSION_K  # the product's constant: the truth must fuse as erstwhile does
LANE_DEPTH = 50


class Bm25:
    """erstwhile's BM25 as a documents x terms impact matrix (CSC, one column per term).
    Queries name vocabulary words; each maps to its term (or none, a stop word)."""

    def __init__(self, data: SpeedData) -> None:
        stems: dict[str, int] = {}
        term_of = np.full(len(data.words), -1, dtype=np.int64)
        for index, word in enumerate(data.words):
            found = terms(word, DEFAULT_LANGUAGE)
            if found:
                term_of[index] = stems.setdefault(found[0], len(stems))
        self.term_of = term_of
        counts = [term_of[t] for t in data.terms]
        counts = [t[t >= 0] for t in counts]
        rows = np.repeat(np.arange(data.size), [len(t) for t in counts])
        cols = np.concatenate(counts)
        tf = sparse.csr_matrix(
            (np.ones(cols.shape[0]), (rows, cols)), shape=(data.size, max(len(stems), 1))
        )
        tf.sum_duplicates()
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        per_length = K1 * B / (lengths.sum() / data.size)
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        n = data.size
        # per term in Python floats, as the store computes its parameters
        weight = np.array(
            [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) * (K1 + 1) * SCALE for d in df.tolist()]
        )
        coo = tf.tocoo()
        # whole numbers of 1/SCALE: their sums are exact, as the store's are
        impact = np.trunc(
            weight[coo.col] * coo.data / (coo.data + K1 * (1 - B) + per_length * lengths[coo.row])
        )
        self.impacts = sparse.csc_matrix((impact, (coo.row, coo.col)), shape=tf.shape)
        self.impacts32 = (self.impacts / SCALE).astype(np.float32)

    def columns(self, words: list[int]) -> list[int]:
        """The distinct terms of a query's vocabulary words."""
        return list(dict.fromkeys(int(t) for t in self.term_of[words] if t >= 0))

    def scores(self, words: list[int], rows: np.ndarray, *, exact: bool = True) -> np.ndarray:
        """Scores of ``rows`` (0 for rows matching no word)."""
        if not exact:
            return np.asarray(self.impacts32[:, self.columns(words)].sum(axis=1)).ravel()[rows]
        summed = np.asarray(self.impacts[:, self.columns(words)].sum(axis=1)).ravel()
        return summed[rows] / SCALE

    def held(self, words: list[int], rows: np.ndarray) -> np.ndarray:
        """How many of the query's distinct terms each of ``rows`` holds."""
        return np.asarray((self.impacts[:, self.columns(words)] != 0).sum(axis=1)).ravel()[rows]

    def matches(self, words: list[int], rows: np.ndarray) -> np.ndarray:
        hit = np.asarray((self.impacts[:, self.columns(words)] != 0).sum(axis=1)).ravel() > 0
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
    """Plain RRF, ties by row: how a peer with no rules of erstwhile's fuses."""
    scores: dict[int, float] = {}
    for lane in lanes:
        for rank, item in enumerate(lane, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))


def fused(lanes: list[np.ndarray], scores: list[np.ndarray], held: dict[int, int]) -> list[int]:
    """The product's fusion (:func:`erstwhile.domain.fusion.reciprocal_rank_fusion`):
    RRF with the coverage bonus, ties by closeness to each lane's best score, then by
    id (a record's id is its row number, zero-padded: the text sorts as the number)."""
    fused = reciprocal_rank_fusion(
        [lane.tolist() for lane in lanes], scores=[s.tolist() for s in scores], coverage=held
    )
    return [int(item) for item, _ in fused]


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
    held = dict(zip(lexical.tolist(), bm25.held(terms, lexical).tolist(), strict=True))
    scores = [bm25.scores(terms, lexical), x64[semantic] @ query.astype(np.float64)]
    return np.array(fused([lexical, semantic], scores, held)[:k], dtype=np.int64)


# -- the floor: float32, precomputed scope ---------------------------------------------


#: Below this share of the rows, gathering them first is cheaper than scoring all.
GATHER_SHARE = 0.25


def floor_semantic(x: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The top k of ``rows`` by dot product, the cheapest honest way: every row is one
    contiguous matvec; a narrow scope gathers its rows first (a cache-sized chunk at a
    time, as erstwhile does); a wide one scores the
    whole matrix in one pass and picks its rows (cheaper than copying most of it)."""
    if rows.shape[0] == x.shape[0]:
        scores = x @ query  # rows is every row, in order
    elif rows.shape[0] < GATHER_SHARE * x.shape[0]:
        scores = gathered_scores(x, rows, query)  # in cache-sized chunks, as erstwhile
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
    held = dict(zip(lexical.tolist(), bm25.held(terms, lexical).tolist(), strict=True))
    scores = [bm25.scores(terms, lexical, exact=False), x[semantic] @ query]
    return np.array(fused([lexical, semantic], scores, held)[:k], dtype=np.int64)

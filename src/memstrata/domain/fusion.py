"""Reciprocal Rank Fusion: rank-based, so lanes with incomparable scores can be fused.

k = 5, not the customary 60. With k = 60 and lanes 50 deep, 1/(k + rank) is nearly flat
(1/61 at the top, 1/110 at rank 50), so a record in the tail of both lanes outscores the
first hit of one lane, and hybrid ranked below its better lane. k = 5 keeps a lane's
first hits first. It was chosen on LoCoMo conversations 0-1 only and holds on 2-4
(hybrid R@10 0.552 -> 0.640 and 0.587 -> 0.655; bench/README.md, "Fusion").
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 5


def reciprocal_rank_fusion(
    lanes: Sequence[Sequence[str]], k: int = RRF_K
) -> list[tuple[str, float]]:
    """Fuses ranked id lists: score(id) = sum over lanes of 1 / (k + rank), rank from 1.
    Ordered by score, ties broken by id."""
    if k <= 0:
        raise ValueError("the RRF constant k must be positive")
    scores: dict[str, float] = {}
    for lane in lanes:
        for rank, item in enumerate(lane, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))

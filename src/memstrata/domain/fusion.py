"""Reciprocal Rank Fusion: rank-based, so lanes with incomparable scores can be fused."""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


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

"""RRF with its tie-break, against a brute-force oracle, and the tie that motivated it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.domain.fusion import RRF_K, reciprocal_rank_fusion

IDS = st.sampled_from([f"r{i}" for i in range(8)])


@st.composite
def lane(draw: st.DrawFn) -> tuple[list[str], list[float]]:
    ids = draw(st.lists(IDS, unique=True, max_size=6))
    scores = sorted(
        draw(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5, 1.0, 2.0]), min_size=len(ids),
                      max_size=len(ids))), reverse=True,
    )  # fmt: skip
    return ids, scores


def oracle(lanes: list[tuple[list[str], list[float]]], k: int) -> list[tuple[str, float]]:
    """Each id's RRF sum and closeness, computed lane by lane from the definitions."""
    every = {i for ids, _ in lanes for i in ids}
    rows = []
    for item in every:
        fused = sum(1 / (k + ids.index(item) + 1) for ids, _ in lanes if item in ids)
        close = 0.0
        for ids, scores in lanes:
            if item in ids:
                low, high = min(scores), max(scores)
                s = scores[ids.index(item)]
                if high == low:
                    close += 1.0
                elif high > 0:
                    close += s / high
                else:
                    close += (s - low) / (high - low)
        rows.append((item, fused, close))
    # a record ranks above another when no other record's key says otherwise
    ranked = sorted(rows, key=lambda r: r[0])
    ranked = sorted(ranked, key=lambda r: r[2], reverse=True)
    ranked = sorted(ranked, key=lambda r: r[1], reverse=True)
    return [(item, fused) for item, fused, _ in ranked]


@given(st.lists(lane(), min_size=1, max_size=3), st.sampled_from([1, 5, 60]))
def test_fusion_matches_the_oracle(lanes: list[tuple[list[str], list[float]]], k: int) -> None:
    got = reciprocal_rank_fusion([i for i, _ in lanes], k, scores=[s for _, s in lanes])
    want = oracle(lanes, k)
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_swapped_first_two_are_decided_by_how_close_each_came_to_its_lanes_best() -> None:
    # both lanes hold a and b at ranks 1 and 2, in opposite orders: equal RRF sums
    lexical = (["b", "a", "c"], [9.0, 7.0, 3.0])  # a is far below b
    semantic = (["a", "b", "c"], [0.80, 0.79, 0.40])  # b is just below a
    fused = reciprocal_rank_fusion(
        [lexical[0], semantic[0]], RRF_K, scores=[lexical[1], semantic[1]]
    )
    assert fused[0][1] == fused[1][1]
    assert [i for i, _ in fused] == ["b", "a", "c"]
    # without scores the id decides, as before
    assert [i for i, _ in reciprocal_rank_fusion([lexical[0], semantic[0]])] == ["a", "b", "c"]


def test_scores_must_align_with_the_lanes() -> None:
    with pytest.raises(ValueError, match="one score per id"):
        reciprocal_rank_fusion([["a", "b"]], scores=[[1.0]])
    with pytest.raises(ValueError, match="positive"):
        reciprocal_rank_fusion([["a"]], 0)

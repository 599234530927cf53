"""RRF with its coverage bonus and its tie-break, against a brute-force oracle;
properties of the rule; the cases that motivated each."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erstwhile.domain.fusion import COVERAGE_BONUS, RRF_K, coverage_bonus, reciprocal_rank_fusion
from erstwhile.domain.records import Record
from erstwhile.domain.search import Ranking
from erstwhile.service_fusion import fuse, query_coverage
from erstwhile.store.base import LexicalHits

IDS = st.sampled_from([f"r{i}" for i in range(8)])


@st.composite
def lane(draw: st.DrawFn) -> tuple[list[str], list[float]]:
    ids = draw(st.lists(IDS, unique=True, max_size=6))
    scores = sorted(
        draw(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5, 1.0, 2.0]), min_size=len(ids),
                      max_size=len(ids))), reverse=True,
    )  # fmt: skip
    return ids, scores


def oracle(
    lanes: list[tuple[list[str], list[float]]], k: int, held: dict[str, int] | None = None
) -> list[tuple[str, float]]:
    """Each id's RRF sum, bonus and closeness, computed lane by lane from the definitions."""
    every = {i for ids, _ in lanes for i in ids}
    held = {i: n for i, n in (held or {}).items() if i in every}
    counts = set(held.values())
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
        gains = len(counts) > 1 and held.get(item) == max(counts)
        rows.append((item, fused + (COVERAGE_BONUS if gains else 0.0), fused, close))
    # a record ranks above another when no other record's key says otherwise
    ranked = sorted(rows, key=lambda r: r[0])
    ranked = sorted(ranked, key=lambda r: r[3], reverse=True)
    ranked = sorted(ranked, key=lambda r: r[2], reverse=True)
    ranked = sorted(ranked, key=lambda r: r[1], reverse=True)
    return [(item, total) for item, total, _, _ in ranked]


HELD = st.dictionaries(IDS, st.integers(1, 4), max_size=8)


@given(st.lists(lane(), min_size=1, max_size=3), st.sampled_from([1, 5, 60]), HELD)
def test_fusion_matches_the_oracle(
    lanes: list[tuple[list[str], list[float]]], k: int, held: dict[str, int]
) -> None:
    got = reciprocal_rank_fusion([i for i, _ in lanes], k, scores=[s for _, s in lanes],
                                 coverage={i: n for i, n in held.items()
                                           if any(i in ids for ids, _ in lanes)})  # fmt: skip
    want = oracle(lanes, k, held)
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


@st.composite
def two_lanes(draw: st.DrawFn) -> tuple[list[str], list[str], dict[str, int]]:
    """A lexical and a semantic lane over the same few ids, and the terms each lexical
    hit holds."""
    lexical = draw(st.lists(IDS, unique=True, min_size=1, max_size=8))
    semantic = draw(st.permutations(draw(st.lists(IDS, unique=True, max_size=8))))
    held = {i: draw(st.integers(1, 4)) for i in lexical}
    return lexical, list(semantic), held


@given(two_lanes())
def test_the_bonus_moves_only_the_best_covered_up_keeping_each_group_in_rrf_order(
    case: tuple[list[str], list[str], dict[str, int]],
) -> None:
    lexical, semantic, held = case
    plain = [i for i, _ in reciprocal_rank_fusion([lexical, semantic])]
    fused = [i for i, _ in reciprocal_rank_fusion([lexical, semantic], coverage=held)]
    assert sorted(fused) == sorted(plain)
    gained = set(coverage_bonus(held))
    # within the records that gained, and within those that did not, the order is RRF's
    assert [i for i in fused if i in gained] == [i for i in plain if i in gained]
    assert [i for i in fused if i not in gained] == [i for i in plain if i not in gained]
    # no record that gained ranks lower than without the bonus, none that did not higher
    for item in fused:
        moved = plain.index(item) - fused.index(item)
        assert moved >= 0 if item in gained else moved <= 0


@given(two_lanes())
def test_a_record_first_in_both_lanes_is_passed_only_by_better_covered_ones(
    case: tuple[list[str], list[str], dict[str, int]],
) -> None:
    lexical, semantic, held = case
    if not semantic or semantic[0] != lexical[0]:
        semantic = [lexical[0], *[i for i in semantic if i != lexical[0]]]
    fused = [i for i, _ in reciprocal_rank_fusion([lexical, semantic], coverage=held)]
    gained = coverage_bonus(held)
    # only the bonus can lift a record over 1/6 + 1/6, and only over one without it
    above = fused[: fused.index(lexical[0])]
    assert all(i in gained for i in above) and (not above or lexical[0] not in gained)
    if held[lexical[0]] == max(held.values()):
        assert fused[0] == lexical[0]


@given(two_lanes())
def test_without_a_difference_in_coverage_the_fusion_is_rrf_alone(
    case: tuple[list[str], list[str], dict[str, int]],
) -> None:
    lexical, semantic, held = case
    same = dict.fromkeys(held, max(held.values()))
    assert reciprocal_rank_fusion([lexical, semantic], coverage=same) == (
        reciprocal_rank_fusion([lexical, semantic])
    )


def test_coverage_bonus_goes_to_every_record_holding_the_most_terms_and_none_when_all_equal() -> (
    None
):
    assert coverage_bonus({"a": 3, "b": 2, "c": 3}) == {"a": COVERAGE_BONUS, "c": COVERAGE_BONUS}
    assert coverage_bonus({"a": 1, "b": 1}) == {}
    assert coverage_bonus({}) == {}


def hits(contents: dict[str, str], scores: list[float]) -> list[tuple[Record, float]]:
    return [
        (Record(id=i, content=c), s) for (i, c), s in zip(contents.items(), scores, strict=True)
    ]


def test_the_fact_that_answers_wins_over_the_semantic_lanes_confident_neighbour() -> None:
    # "Where does Jules Horvat work?": the lexical lane has the right fact first by a small
    # margin; the semantic lane ranks another of his facts first and the right one 15th
    lexical = LexicalHits(hits({
        "employer": "Jules Horvat works at Juniper Software.",
        "job": "Jules Horvat is a surveyor by profession.",
        "other": "Jules Galli works at Helix Labs.",
    }, [8.1, 6.7, 5.1]))  # fmt: skip
    lexical.terms, lexical.language = ("jule", "horvat", "work"), "english"
    others = [(Record(id=f"x{n}", content="someone else"), 0.5) for n in range(13)]
    semantic = [(Record(id="job"), 0.69), *others, (Record(id="employer"), 0.45)]
    assert query_coverage(lexical) == {"employer": 3, "job": 2, "other": 2}
    unsaid = fuse(Ranking.HYBRID, [*lexical], semantic, 2)  # no terms known: RRF alone
    assert [h.record.id for h in unsaid] == ["job", "employer"]
    top = fuse(Ranking.HYBRID, lexical, semantic, 2)
    assert [h.record.id for h in top] == ["employer", "job"]
    assert top[0].score == pytest.approx(1 / 6 + 1 / 20 + COVERAGE_BONUS)


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

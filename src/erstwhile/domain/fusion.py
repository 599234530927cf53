"""Reciprocal Rank Fusion: rank-based, so lanes with incomparable scores can be fused.

k = 5, not the customary 60. With k = 60 and lanes 50 deep, 1/(k + rank) is nearly flat
(1/61 at the top, 1/110 at rank 50), so a record in the tail of both lanes outscores the
first hit of one lane, and hybrid ranked below its better lane. k = 5 keeps a lane's
first hits first. It was chosen on LoCoMo conversations 0-1 only and holds on 2-4
(hybrid R@10 0.552 -> 0.640 and 0.587 -> 0.655; bench/README.md, "Fusion").

Coverage. Ranks alone cannot see what failed the knowledge-update questions: "Where did
Jules Horvat work on 19 December 2023?" has the lexical lane put "Jules Horvat works at
Juniper Software." first and "Jules Horvat is a surveyor by profession." second, while
the semantic lane puts the surveyor first and the employer 15th; RRF then ranks the
surveyor first. The right record holds more of the question's words (jules, horvat,
work) than any other. So the records among the lexical lane's hits that hold the most
of the query's distinct terms (in the namespace's text-search language) gain
``COVERAGE_BONUS`` = 0.1 on their RRF sum -- about one lane's rank 1 against its rank
15 -- unless every lexical hit holds as many (a one-word query: a bonus for all would
only weigh the lexical lane over the semantic one). Between records the bonus did not
separate, the order is RRF's. Chosen on the time-awareness set of seed 12 and LoCoMo
conversations 0-1 (hybrid accuracy@1 now / as of 0.996 / 0.978 -> 1.000 / 1.000;
R@10 user 0.7153 -> 0.7250, dated 0.7231 -> 0.7242), reported on seed 11 (0.996 / 0.986
-> 1.000 / 1.000) and conversations 2-4 (0.7066 -> 0.7151, 0.7197 -> 0.7251). A bonus
proportional to coverage (the share of the query's terms held, or relative to the most
held) needed weights that cost LoCoMo 3-4 points before it fixed the as-of questions
(bench/README.md, "Fusion").

Ties. Two lanes that swap their first two hits give both the same fused score (1/6 +
1/7 either way), which happens whenever the lanes agree on the pair but not on the
order. Such a tie is broken by how close each record came to its lanes' best: the sum
over lanes of the record's score divided by that lane's first score (BM25 scores and
cosine similarities both have a natural zero; a lane whose best score is not positive
is min-max normalised instead). A record one lane scores just below its first beats one
the other lane scores far below its first. Only exact ties (of the RRF sum with the
bonus, then of the RRF sum) are decided this way; the id breaks what is still equal.
Chosen on the time-awareness set of seed 12 over min-max within the lane's list,
reported on seed 11 (bench/README.md, "Fusion").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 5
#: What a record holding the most of the query's words (among the lexical lane's hits,
#: when they do not all hold as many) adds to its RRF sum: 0.1 is about the step from
#: rank 1 to rank 15 of one lane at k = 5 (1/6 - 1/20).
COVERAGE_BONUS = 0.1


def reciprocal_rank_fusion(
    lanes: Sequence[Sequence[str]],
    k: int = RRF_K,
    *,
    scores: Sequence[Sequence[float]] | None = None,
    coverage: Mapping[str, int] | None = None,
) -> list[tuple[str, float]]:
    """Fuses ranked id lists: score(id) = sum over lanes of 1 / (k + rank), rank from 1,
    plus :data:`COVERAGE_BONUS` for the records :func:`coverage_bonus` picks from
    ``coverage`` (per id, how many of the query's distinct terms the record holds).
    Ordered by that score, then by the RRF sum alone; ties broken by the lanes'
    normalised ``scores`` (one list per lane, aligned with its ids, higher is better)
    when given, then by id."""
    if k <= 0:
        raise ValueError("the RRF constant k must be positive")
    if scores is not None and (
        len(scores) != len(lanes)
        or any(len(s) != len(ids) for s, ids in zip(scores, lanes, strict=True))
    ):
        raise ValueError("scores must give one score per id of every lane")
    fused: dict[str, float] = {}
    closeness: dict[str, float] = {}
    for number, lane in enumerate(lanes):
        normalised = _closeness(scores[number]) if scores is not None else [0.0] * len(lane)
        for rank, item in enumerate(lane, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
            closeness[item] = closeness.get(item, 0.0) + normalised[rank - 1]
    bonus = coverage_bonus(coverage or {})
    total = {item: rrf + bonus[item] if item in bonus else rrf for item, rrf in fused.items()}
    return [
        (item, total[item])
        for item in sorted(fused, key=lambda i: (-total[i], -fused[i], -closeness[i], i))
    ]


def coverage_bonus(coverage: Mapping[str, int]) -> dict[str, float]:
    """The records that hold the most of the query's terms, each with the bonus; none
    when every record holds as many (a one-word query, say): coverage then tells the
    records nothing apart, and a bonus for all would only weigh one lane over the other."""
    if not coverage:
        return {}
    most = max(coverage.values())
    if min(coverage.values()) == most:
        return {}
    return {item: COVERAGE_BONUS for item, held in coverage.items() if held == most}


def _closeness(values: Sequence[float]) -> list[float]:
    """Each score relative to the lane's best (its first): s / best, or min-max
    normalised when the best is not positive; 1 for all when they are all equal."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high == low:
        return [1.0] * len(values)
    if high > 0:
        return [v / high for v in values]
    return [(v - low) / (high - low) for v in values]

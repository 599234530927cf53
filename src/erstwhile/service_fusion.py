"""Lane results into hits: one lane as is, or both fused by Reciprocal Rank Fusion with
the lexical hits' coverage of the query's terms (:mod:`erstwhile.domain.fusion` holds the
rules; this module reads the lanes the store answered)."""

from __future__ import annotations

from erstwhile.domain.fusion import RRF_K, reciprocal_rank_fusion
from erstwhile.domain.records import Record
from erstwhile.domain.search import Hit, Ranking
from erstwhile.domain.words import terms
from erstwhile.store.base import LexicalHits, SemanticHits


def query_coverage(lexical: list[tuple[Record, float]]) -> dict[str, int]:
    """Per lexical hit, how many of the query's distinct terms its content holds, in the
    namespace's text-search language (the terms the lane matched; nothing when the lane
    did not say what it matched)."""
    if not isinstance(lexical, LexicalHits) or not lexical.terms:
        return {}
    wanted = set(lexical.terms)
    return {
        record.id: len(wanted.intersection(terms(record.content, lexical.language)))
        for record, _ in lexical
    }


def fuse(
    ranking: Ranking,
    lexical: list[tuple[Record, float]],
    semantic: list[tuple[Record, float]],
    top_k: int,
) -> list[Hit]:
    """Turns lane results into hits: one lane as is, or both fused by RRF (k = RRF_K)
    with the lexical hits' coverage of the query's terms (:mod:`erstwhile.domain.fusion`)."""
    signals: dict[str, dict[str, dict[str, float | int | str]]] = {}
    records: dict[str, Record] = {}
    for rank, (record, score) in enumerate(lexical, start=1):
        records[record.id] = record
        signals.setdefault(record.id, {})["lexical"] = {"rank": rank, "score": score}
    index = semantic.found_by if isinstance(semantic, SemanticHits) else None
    for rank, (record, similarity) in enumerate(semantic, start=1):
        records[record.id] = record
        lane: dict[str, float | int | str] = {"rank": rank, "similarity": similarity}
        if index is not None:
            lane["index"] = index  # an approximate index found it (exact otherwise)
        signals.setdefault(record.id, {})["semantic"] = lane
    if ranking == Ranking.HYBRID:
        coverage = query_coverage(lexical)
        for record_id, held in coverage.items():
            signals[record_id]["lexical"]["terms"] = held  # what the coverage bonus reads
        fused = reciprocal_rank_fusion(
            [[r.id for r, _ in lexical], [r.id for r, _ in semantic]], RRF_K,
            scores=[[s for _, s in lexical], [s for _, s in semantic]], coverage=coverage,
        )  # fmt: skip
    else:
        fused = [(r.id, score) for r, score in (lexical or semantic)]
    return [
        Hit(record=records[record_id], score=score, signals=signals[record_id])
        for record_id, score in fused[:top_k]
    ]

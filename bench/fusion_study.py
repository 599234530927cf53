"""Fusion studied offline: both lanes dumped 50 deep per question, fused in Python.

    python -m bench.fusion_study dump-time --seed 12 --out /tmp/fs-time-12.json
    python -m bench.fusion_study dump-locomo --out /tmp/fs-locomo.json
    python -m bench.fusion_study compare /tmp/fs-time-12.json /tmp/fs-locomo.json ...

A dump holds, per question, the lexical lane and the semantic lane exactly as the
product's hybrid search sees them (``candidate_k`` = 50 deep, the same scope and time
options), each hit with its id, its lane score and its content's terms in the
namespace's language (what a coverage signal needs), and the product's own hybrid top
10, so an offline fusion can be checked to reproduce the product (``compare`` reports
how many questions it does not). The time-awareness dump is the ``time options``
condition (``current`` for now, ``as_of`` for as of) over the ``plain`` namespace; the
LoCoMo dump is both content formats, every conversation. Tuning reads seed 12 and
conversations 0-1 only; seed 11 and conversations 2-4 are reported, never tuned on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import erstwhile
from bench import timeaware
from bench.locomo import CATEGORIES, FORMATS, evidence_ids, metrics, sessions_of
from erstwhile.domain.fusion import RRF_K, reciprocal_rank_fusion
from erstwhile.domain.words import DEFAULT_LANGUAGE, query_terms, term_counts
from erstwhile.jobs.importing import import_conversation

DEPTH = 50
TUNING_CONVERSATIONS = 2  # conversations 0-1 tune, 2-4 are held out


def _lanes(memory: erstwhile.Memory, namespace: str, text: str, **options: Any) -> dict[str, Any]:
    lanes: dict[str, Any] = {"query_terms": query_terms(text, DEFAULT_LANGUAGE)}
    for ranking, field in (("lexical", "score"), ("semantic", "similarity")):
        result = memory.search(namespace, text, ranking=ranking, top_k=DEPTH, **options)
        lanes[ranking] = [
            {
                "id": hit.record.id,
                "score": hit.signals[ranking][field],
                "terms": sorted(term_counts(hit.record.content, DEFAULT_LANGUAGE)[0]),
            }
            for hit in result.hits
        ]
    lanes["hybrid"] = memory.search(namespace, text, ranking="hybrid", top_k=10, **options).ids()
    return lanes


def dump_time(seed: int, subjects: int = 500) -> dict[str, Any]:
    records, questions = timeaware.generate(subjects, seed)
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-fusion-"))
    try:
        with erstwhile.open(workdir / "time.db", background_jobs=False) as memory:
            memory.upsert("plain", records)
            rows = []
            for question in questions:
                options = {"as_of": timeaware.day(question.at)} if question.at else {}
                row = _lanes(memory, "plain", question.text, **options)
                row.update(kind=question.kind, expected=question.expected)
                rows.append(row)
        return {"set": "time", "seed": seed, "questions": rows}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def dump_locomo(path: Path) -> dict[str, Any]:
    samples = json.loads(path.read_text())
    out: dict[str, Any] = {"set": "locomo", "formats": {}}
    for name, template in FORMATS.items():
        workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-fusion-"))
        rows = []
        try:
            with erstwhile.open(workdir / "locomo.db", background_jobs=False) as memory:
                for number, sample in enumerate(samples):
                    sample_id = str(sample["sample_id"])
                    namespace = sample_id.lower()
                    sessions = sessions_of(sample)
                    known = {t["id"] for s in sessions for t in s["turns"]}
                    import_conversation(
                        memory, namespace, sessions, conversation=sample_id, template=template
                    )
                    for qa in sample["qa"]:
                        relevant, _ = evidence_ids(qa.get("evidence", []), known)
                        if not relevant:
                            continue
                        row = _lanes(memory, namespace, str(qa["question"]))
                        row.update(
                            conversation=number,
                            category=int(qa["category"]),
                            wanted=sorted(f"{sample_id}/{t}" for t in relevant),
                        )
                        rows.append(row)
                    print(f"  {name} {sample_id}: {len(rows)} questions", file=sys.stderr)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        out["formats"][name] = rows
    return out


# -- offline fusion rules ------------------------------------------------------------

#: A rule: (query terms, lexical hits, semantic hits) -> ordered ids.
Rule = Callable[[list[str], list[dict[str, Any]], list[dict[str, Any]]], list[str]]


def product(
    terms: list[str], lexical: list[dict[str, Any]], semantic: list[dict[str, Any]]
) -> list[str]:
    """The product's fusion, through its own function: RRF k = 5, the coverage bonus,
    the closeness tie-break."""
    wanted = set(terms)
    fused = reciprocal_rank_fusion(
        [[h["id"] for h in lexical], [h["id"] for h in semantic]],
        RRF_K,
        scores=[[h["score"] for h in lexical], [h["score"] for h in semantic]],
        coverage={h["id"]: len(wanted.intersection(h["terms"])) for h in lexical},
    )
    return [i for i, _ in fused]


def before(
    _terms: list[str], lexical: list[dict[str, Any]], semantic: list[dict[str, Any]]
) -> list[str]:
    """The fusion before the coverage bonus: RRF k = 5 and the closeness tie-break."""
    fused = reciprocal_rank_fusion(
        [[h["id"] for h in lexical], [h["id"] for h in semantic]],
        RRF_K,
        scores=[[h["score"] for h in lexical], [h["score"] for h in semantic]],
    )
    return [i for i, _ in fused]


def coverage_rule(weight: float, *, mode: str = "share") -> Rule:
    """The fusion before (RRF k = 5, closeness ties) plus ``weight`` x a coverage of the
    query's distinct terms, taken from the lexical lane's hits (a record the lexical lane
    did not find holds none), ties in the new sum in the order before. Modes:
    ``share`` = held / the query's terms; ``relative`` = held / the most any lexical hit
    holds; ``full`` = 1 for the hits holding that most, else 0; ``full-multi`` = full,
    none when the most is one term; ``full-disc`` (the product's rule) = full, none when
    every lexical hit holds as many."""

    def rule(
        terms: list[str], lexical: list[dict[str, Any]], semantic: list[dict[str, Any]]
    ) -> list[str]:
        wanted = set(terms)
        held = {h["id"]: len(wanted.intersection(h["terms"])) for h in lexical}
        most = max(held.values(), default=0)
        cover: dict[str, float] = {}
        if mode == "share":
            cover = {i: n / len(wanted) for i, n in held.items()} if wanted else {}
        elif mode == "relative":
            cover = {i: n / most for i, n in held.items()} if most else {}
        elif not (
            (mode == "full-multi" and most < 2)
            or (mode == "full-disc" and min(held.values(), default=0) == most)
        ):
            cover = {i: 1.0 if n == most else 0.0 for i, n in held.items()}
        ordered = before(terms, lexical, semantic)
        order = {i: n for n, i in enumerate(ordered)}
        sums = dict(_rrf_sums(lexical, semantic, RRF_K))
        total = {i: sums[i] + weight * cover.get(i, 0.0) for i in ordered}
        return sorted(total, key=lambda i: (-total[i], order[i]))

    return rule


def _rrf_sums(
    lexical: list[dict[str, Any]], semantic: list[dict[str, Any]], k: int
) -> list[tuple[str, float]]:
    sums: dict[str, float] = {}
    for lane in (lexical, semantic):
        for rank, hit in enumerate(lane, start=1):
            sums[hit["id"]] = sums.get(hit["id"], 0.0) + 1.0 / (k + rank)
    return list(sums.items())


def time_accuracy(dump: dict[str, Any], rule: Rule) -> dict[str, float]:
    hits: dict[str, list[float]] = defaultdict(list)
    for q in dump["questions"]:
        ranked = rule(q["query_terms"], q["lexical"], q["semantic"])
        hits[q["kind"]].append(1.0 if ranked[:1] == [q["expected"]] else 0.0)
    return {kind: round(sum(v) / len(v), 4) for kind, v in hits.items()}


def locomo_recall(
    rows: Sequence[dict[str, Any]], rule: Rule | None, lane: str | None = None
) -> dict[str, float]:
    """R@10 per category and over 1-5; ``lane`` ranks by one lane alone."""
    per: dict[str, list[float]] = defaultdict(list)
    for q in rows:
        if lane is not None:
            ranked = [h["id"] for h in q[lane]]
        else:
            assert rule is not None
            ranked = rule(q["query_terms"], q["lexical"], q["semantic"])
        score = metrics(ranked, set(q["wanted"]))["R@10"]
        per[str(q["category"])].append(score)
        per["1-5"].append(score)
    return {c: round(sum(v) / len(v), 4) for c, v in sorted(per.items())} | {
        f"n{c}": len(v) for c, v in sorted(per.items())
    }


def reproduces(dump: dict[str, Any]) -> tuple[int, int]:
    """(questions, questions whose offline product top 10 differs from the product's)."""
    rows = (
        dump["questions"]
        if dump["set"] == "time"
        else [q for rows in dump["formats"].values() for q in rows]
    )
    differ = sum(
        1
        for q in rows
        if product(q["query_terms"], q["lexical"], q["semantic"])[:10] != q["hybrid"]
    )
    return len(rows), differ


def study(args: argparse.Namespace) -> None:
    time_dump = json.loads(args.time.read_text())
    locomo = json.loads(args.locomo.read_text())
    parts = {"0-1": lambda q: q["conversation"] < TUNING_CONVERSATIONS}
    if args.held_out:
        parts["2-4"] = lambda q: q["conversation"] >= TUNING_CONVERSATIONS
    rules: dict[str, Rule] = {"before": before, "product": product}
    for mode in args.modes.split(","):
        for w in (float(x) for x in args.weights.split(",")):
            rules[f"{mode} {w}"] = coverage_rule(w, mode=mode)
    lanes = {}
    for fmt, rows in locomo["formats"].items():
        for part, keep in parts.items():
            chosen = [q for q in rows if keep(q)]
            lanes[(fmt, part)] = {
                lane: locomo_recall(chosen, None, lane) for lane in ("lexical", "semantic")
            }
            lx, se = lanes[(fmt, part)]["lexical"], lanes[(fmt, part)]["semantic"]
            print(f"{fmt} {part} lexical {lx['1-5']} semantic {se['1-5']}")
    for name, rule in rules.items():
        acc = time_accuracy(time_dump, rule)
        line = [
            f"{name:>14}: seed {time_dump['seed']} now {acc['now']:.3f} as of {acc['as of']:.3f}"
        ]
        for fmt, rows in locomo["formats"].items():
            for part, keep in parts.items():
                r = locomo_recall([q for q in rows if keep(q)], rule)
                lx, se = lanes[(fmt, part)]["lexical"], lanes[(fmt, part)]["semantic"]
                below = [
                    c
                    for c in CATEGORIES_KEYS
                    if r.get(f"n{c}", 0) >= 40 and r[c] < max(lx[c], se[c])
                ]
                line.append(
                    f"{fmt} {part} {r['1-5']:.4f}" + (f" below:{','.join(below)}" if below else "")
                )
        print(" | ".join(line), flush=True)


CATEGORIES_KEYS = [str(c) for c in CATEGORIES]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fusion_study")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("dump-time")
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--out", type=Path, required=True)
    lo = sub.add_parser("dump-locomo")
    lo.add_argument("--data", type=Path, default=Path("../shared/data/locomo-dev.json"))
    lo.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check")
    c.add_argument("dumps", type=Path, nargs="+")
    st = sub.add_parser("study")
    st.add_argument("--time", type=Path, required=True)
    st.add_argument("--locomo", type=Path, required=True)
    st.add_argument("--held-out", action="store_true", help="report conversations 2-4 too")
    st.add_argument("--weights", default="0,0.05,0.1,0.15,0.2,0.3")
    st.add_argument("--modes", default="share,relative")
    args = parser.parse_args(argv)
    if args.command == "dump-time":
        args.out.write_text(json.dumps(dump_time(args.seed)))
    elif args.command == "dump-locomo":
        args.out.write_text(json.dumps(dump_locomo(args.data)))
    elif args.command == "study":
        study(args)
    else:
        for path in args.dumps:
            print(path, reproduces(json.loads(path.read_text())))


if __name__ == "__main__":
    main()

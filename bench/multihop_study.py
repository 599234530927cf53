"""Second passes for multi-hop questions on LoCoMo, studied offline (issue #44).

Builds the bench's store (the import path, content ``user``: the records and vectors
:mod:`bench.locomo` writes) and, per question, reads the service's own lanes (BM25 and
cosine, 50 deep) and fuses them with the service's own fusion, then tries rules that
search again from the first hits — each deterministic, the same for every question,
none reading the question's category or evidence:

- ``baseline``: the hybrid search as the service runs it (checked against the bench);
- ``rocchio b m``: the dense query moved toward the mean vector of the first ``m`` fused
  hits (weight ``b``), the semantic lane run again with it, fused with the same BM25;
- ``rocchio3 b m``: that second semantic lane as a third RRF lane beside the two;
- ``neighbours m``: the first ``m`` hits' vectors each searched as a query, their lists
  fused as further lanes (a second-pass query built from the first hits);
- ``speaker sem`` / ``speaker both``: when the question names exactly one of the
  conversation's speakers (metadata ``speaker``), the semantic (and lexical) lane scoped
  to that speaker's turns as further lanes;
- ``mmr l``: maximal marginal relevance over the fused list (weight ``l`` on the fused
  score, ``1 - l`` against the closest hit already taken);
- ``cap c``: at most ``c`` hits of one session in the first ten;
- ``rm3 t m``: ``t`` terms of the first ``m`` hits (by BM25-weighted frequency) added to
  the lexical query, fused with the first semantic lane.

    python -m bench.multihop_study [--cache FILE] [--out FILE] [--only RULE,...]

Prints R@10 per category and over 1-5 for every rule; the JSON holds them all.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from bench.common import locomo_path, log, write_json
from bench.locomo import CATEGORIES, FORMATS, VectorFile, evidence_ids, metrics, sessions_of
from erstwhile.domain.fusion import RRF_K, reciprocal_rank_fusion
from erstwhile.domain.search import Ranking, SearchRequest
from erstwhile.domain.words import terms
from erstwhile.jobs.importing import import_conversation
from erstwhile.service_fusion import fuse, query_coverage

DEPTH = 50


def lanes(memory: erstwhile.Memory, namespace: str, question: str, vector: np.ndarray,
          embedder_id: str) -> tuple[Any, Any]:  # fmt: skip
    store = memory.service.store
    request = SearchRequest(query=question, top_k=10)
    window = request.window(memory.service.clock())
    lexical = store.lexical(namespace, request, window, DEPTH)
    semantic, _ = store.semantic(namespace, request, window, embedder_id, vector, DEPTH)
    return lexical, semantic


def rrf(lists: list[list[str]], lexical: Any) -> list[str]:
    coverage = query_coverage(lexical)
    fused = reciprocal_rank_fusion(lists, RRF_K, coverage=coverage)
    return [i for i, _ in fused]


def wants(only: set[str] | None, rule: str) -> bool:
    return only is None or rule in only


def mmr(fused: list[Any], vectors: dict[str, np.ndarray], lam: float) -> list[str]:
    """Maximal marginal relevance over the fused list: relevance = fused score over the
    first's, redundancy = the highest cosine to a hit already taken."""
    top = fused[0].score if fused else 1.0
    left = {h.record.id: h.score / top for h in fused}
    taken: list[str] = []
    while left and len(taken) < 10:

        def gain(i: str) -> float:
            seen = max((float(vectors[i] @ vectors[j]) for j in taken), default=0.0)
            return lam * left[i] - (1 - lam) * seen

        best = max(left, key=gain)
        taken.append(best)
        del left[best]
    return taken + [h.record.id for h in fused if h.record.id not in taken]


def capped(ranked: list[str], session_of: dict[str, str], cap: int) -> list[str]:
    """At most ``cap`` hits of one session in the first ten; the rest keep their order."""
    first: list[str] = []
    rest: list[str] = []
    counts: Counter[str] = Counter()
    for i in ranked:
        if len(first) < 10 and counts[session_of[i]] < cap:
            first.append(i)
            counts[session_of[i]] += 1
        else:
            rest.append(i)
    return first + rest


def unit(v: np.ndarray) -> np.ndarray:
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


def run(path: Path, cache: Path | None, only: set[str] | None = None) -> dict[str, Any]:
    samples = json.loads(path.read_text())
    embedder = VectorFile(cache) if cache is not None else None
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-multihop-"))
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    try:
        memory = erstwhile.open(workdir / "s.db", embedder=embedder, background_jobs=False)
        with memory:
            eid = memory.embedder_id("default")
            store = memory.service.store
            for sample in samples:
                sid = str(sample["sample_id"])
                ns = sid.lower()
                sessions = sessions_of(sample)
                known = {t["id"] for s in sessions for t in s["turns"]}
                report = import_conversation(memory, ns, sessions, conversation=sid,
                                             template=FORMATS["user"])  # fmt: skip
                vectors = {k: np.asarray(v, dtype=np.float32)
                           for k, v in store.vectors_for(ns, report.ids, eid).items()}  # fmt: skip
                contents = {r: memory.get(ns, r).content for r in report.ids}
                session_of = {r: memory.get(ns, r).metadata["session"] for r in report.ids}
                speakers = sorted({memory.get(ns, r).metadata["speaker"] for r in report.ids})
                split = "0-1" if samples.index(sample) < 2 else "2-4"
                t = time.perf_counter()
                for qa in sample["qa"]:
                    relevant, _ = evidence_ids(qa.get("evidence", []), known)
                    if not relevant:
                        continue
                    wanted = {f"{sid}/{turn}" for turn in relevant}
                    cat = str(int(qa["category"]))
                    question = str(qa["question"])
                    qv = memory.service.embedder_for(ns).embed_query(question)  # type: ignore[union-attr]
                    lexical, semantic = lanes(memory, ns, question, qv, eid)
                    lex_ids = [r.id for r, _ in lexical]
                    sem_ids = [r.id for r, _ in semantic]
                    fused = fuse(Ranking.HYBRID, lexical, semantic, DEPTH)
                    base = [h.record.id for h in fused]
                    variants: dict[str, list[str]] = {"baseline": base}
                    named = [x for x in speakers if x.lower() in question.lower()]
                    if not wants(only, "speaker"):
                        pass
                    elif len(named) == 1:
                        scoped = SearchRequest(query=question, filter={"speaker": named[0]})
                        own_sem, _ = store.semantic(ns, scoped, None, eid, qv, DEPTH)
                        own_lex = store.lexical(ns, scoped, None, DEPTH)
                        own_sem_ids = [r.id for r, _ in own_sem]
                        variants["speaker sem"] = rrf([lex_ids, sem_ids, own_sem_ids], lexical)
                        variants["speaker both"] = rrf(
                            [lex_ids, sem_ids, own_sem_ids, [r.id for r, _ in own_lex]], lexical
                        )
                    else:
                        variants["speaker sem"] = variants["speaker both"] = base
                    for b in (0.3, 0.5, 1.0) if wants(only, "rocchio") else ():
                        for m in (2, 3, 5):
                            moved = unit(qv + b * np.mean([vectors[i] for i in base[:m]], axis=0))
                            again, _ = store.semantic(
                                ns, SearchRequest(query=question), None, eid, moved, DEPTH
                            )
                            again_ids = [r.id for r, _ in again]
                            variants[f"rocchio {b} {m}"] = rrf([lex_ids, again_ids], lexical)
                            variants[f"rocchio3 {b} {m}"] = rrf(
                                [lex_ids, sem_ids, again_ids], lexical
                            )
                    for m in (2, 3) if wants(only, "neighbours") else ():
                        extra = []
                        for i in base[:m]:
                            near, _ = store.semantic(
                                ns, SearchRequest(query=question), None, eid, vectors[i], DEPTH
                            )
                            extra.append([r.id for r, _ in near if r.id != i])
                        variants[f"neighbours {m}"] = rrf([lex_ids, sem_ids, *extra], lexical)
                    asked = set(terms(question, "english"))
                    for t_count, m in ((5, 3), (10, 5)) if wants(only, "rm3") else ():
                        counts: Counter[str] = Counter()
                        for i in base[:m]:
                            counts.update(w for w in terms(contents[i], "english")
                                          if w not in asked)  # fmt: skip
                        added = [w for w, _ in counts.most_common(t_count)]
                        expanded = question + " " + " ".join(added)
                        request = SearchRequest(query=expanded, top_k=10)
                        lex2 = store.lexical(ns, request, None, DEPTH)
                        variants[f"rm3 {t_count} {m}"] = rrf(
                            [[r.id for r, _ in lex2], sem_ids], lex2
                        )
                    for lam in (0.5, 0.7, 0.85) if wants(only, "mmr") else ():
                        variants[f"mmr {lam}"] = mmr(fused, vectors, lam)
                    for cap in (2, 3, 4) if wants(only, "cap") else ():
                        variants[f"cap {cap}"] = capped(base, session_of, cap)
                    for name, ranked in variants.items():
                        score = metrics(ranked, wanted)["R@10"]
                        per[name][cat].append(score)
                        per[name][f"{split} {cat}"].append(score)
                        per[name][split].append(score)
                log(f"  {sid}: {time.perf_counter() - t:.1f} s")
    finally:
        if embedder is not None:
            embedder.save()
        shutil.rmtree(workdir, ignore_errors=True)
    table: dict[str, Any] = {}
    for name, cats in per.items():
        row = {c: round(float(np.mean(v)), 4) for c, v in sorted(cats.items())}
        row["1-5"] = round(float(np.mean([x for c in "12345" for x in cats[c]])), 4)
        table[name] = row
    return {"file": path.name, "categories": CATEGORIES, "R@10": table}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.multihop_study")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--only",
        default=None,
        help="rules, comma-separated: speaker, rocchio, neighbours, rm3, mmr, cap",
    )
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    result = run(locomo_path(), args.cache, only)
    base = result["R@10"]["baseline"]
    for name, row in result["R@10"].items():
        for part in ("", "0-1 ", "2-4 "):
            cells = [f"{part}{c}" for c in "12345"] + ["1-5" if not part else part.strip()]
            delta = " ".join(f"{c[-3:]}:{row[c]:.3f}({row[c] - base[c]:+.3f})" for c in cells)
            print(f"{name:16s} {part or 'all '} {delta}")
    if args.out is not None:
        write_json(args.out, result)


if __name__ == "__main__":
    main()

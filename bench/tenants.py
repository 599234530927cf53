"""Tenants cost what they hold: a search in one namespace of a store holding 100
namespaces of 1k records each, against the same search in a store holding only that
namespace.

    python -m bench.tenants [--namespaces 100] [--per 1000] [--queries 60]
        [--out bench/results/tenants.json]

Both stores get byte-identical records in the measured namespace (``bench.synth`` data,
precomputed vectors); the crowded one gets the other namespaces from the same generator
with other seeds. Queries alternate between the two stores (one, then the other), so a
load swing on this shared machine hits both alike; the figure is the ratio of p50s.
Cases: semantic (current), semantic filtered (room AND current), lexical, hybrid.
Run with ``OMP_NUM_THREADS=1`` (as ``python -m bench`` sets it): one query thread.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import erstwhile
from bench.common import latency, log, machine, stamp, write_json
from bench.engines.erstwhile_engine import QueryTableEmbedder, records
from bench.synth import generate

MEASURED = "tenant-0"


def load(memory: erstwhile.Memory, namespace: str, batch: list[dict[str, Any]]) -> float:
    t = time.perf_counter()
    for start in range(0, len(batch), 1000):
        memory.upsert(namespace, batch[start : start + 1000])
    return time.perf_counter() - t


def run_tenants(namespaces: int, per: int, queries: int) -> dict[str, Any]:
    data = generate(per, queries, 7)
    table = {text: data.queries.vectors[j] for j, text in enumerate(data.queries.texts)}
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-tenants-"))
    embedder = QueryTableEmbedder(384, table)
    alone = erstwhile.open(str(workdir / "alone.db"), embedder=embedder, background_jobs=False)
    crowd = erstwhile.open(str(workdir / "crowd.db"), embedder=embedder, background_jobs=False)
    try:
        measured = records(data, 0, per)
        load(alone, MEASURED, measured)
        load(crowd, MEASURED, measured)
        written = 0.0
        for n in range(1, namespaces):
            other = generate(per, 1, 100 + n)
            written += load(crowd, f"tenant-{n}", records(other, 0, per))
            if n % 10 == 0:
                log(f"  tenants: {n}/{namespaces} namespaces written")
        cases: dict[str, Any] = {}
        for case in ("semantic", "semantic_filtered", "lexical", "hybrid"):
            times: dict[str, list[float]] = {"alone": [], "crowd": []}
            same = 0
            for j in range(queries):
                options: dict[str, Any] = {"top_k": 10}
                if case in ("semantic_filtered", "hybrid"):
                    options["filter"] = {"room": data.queries.rooms[j]}
                if case.startswith("semantic"):
                    options["query_vector"] = data.queries.vectors[j].tolist()
                else:
                    options["ranking"] = "lexical" if case == "lexical" else "hybrid"
                text = data.queries.texts[j] if not case.startswith("semantic") else None
                answers = []
                order = [("alone", alone), ("crowd", crowd)]
                for name, memory in order if j % 2 == 0 else order[::-1]:
                    t = time.perf_counter()
                    result = memory.search(MEASURED, text, **options)
                    times[name].append(time.perf_counter() - t)
                    answers.append([hit.record.id for hit in result.hits])
                same += answers[0] == answers[1]
            entry = {name: latency(values[2:]) for name, values in times.items()}
            entry["p50_ratio_crowd_to_alone"] = round(
                entry["crowd"]["p50_ms"] / entry["alone"]["p50_ms"], 3
            )
            entry["same_answers"] = f"{same}/{queries}"
            cases[case] = entry
            log(f"  {case}: {entry['p50_ratio_crowd_to_alone']}x, same {same}/{queries}")
        return {
            "namespaces": namespaces,
            "records_per_namespace": per,
            "queries": queries,
            "crowd_ingest_records_per_s": round((namespaces - 1) * per / written, 1),
            "cases": cases,
            "machine": machine(),
            "when": stamp(),
        }
    finally:
        alone.close()
        crowd.close()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--per", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--out", default="bench/results/tenants.json")
    args = parser.parse_args()
    result = run_tenants(args.namespaces, args.per, args.queries)
    write_json(Path(args.out), result)
    print(json.dumps(result["cases"], indent=2))


if __name__ == "__main__":
    main()

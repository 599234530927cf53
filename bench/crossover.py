"""Where the SQLite vector lane's list index (IVF) starts to pay: exact against the index
by scope size, on a store the speed bench wrote (``--store``).

    python -m bench.crossover --db DIR/erstwhile-100000.db [--queries 60]
        [--out bench/results/crossover_100k.json]

For each share of the store's vectors (a random scope: the room filter of the speed
bench is independent of the vectors too), it times what the lane does once the scope
is decided, with the same objects the search uses (``VectorCache``, ``_Matrix``,
``ListIndex``): exact = score the scope's rows and take the top 10; index = probe the
nearest lists (as many as the build calibrated for the depth ``10 / share``, more
when too few are in scope, falling back to exact when every list cannot fill the top
10) and rescore their in-scope members exactly. Recall@10
of the index path is against the exact path. Queries go to both paths in turn (A B A
B ...), so load swings hit both alike; the ratio index / exact is the figure.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # one query thread, as python -m bench (bench/README)

import numpy as np  # noqa: E402

import erstwhile  # noqa: E402
from bench.common import (  # noqa: E402
    RESULTS,
    latency,
    log,
    machine,
    size_label,
    stamp,
    write_json,
)  # fmt: skip
from erstwhile.embedding import HashEmbedder  # noqa: E402
from erstwhile.store.sql.scoring import top_k  # noqa: E402
from erstwhile.store.sqlite import ann  # noqa: E402

SHARES = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5, 0.75, 1.0)
PROBES = (1, 2, 4, 8, 16, 32)
TOP = 10


def _timed(seconds: list[float], cpu: list[float]) -> dict[str, float]:
    wall = latency(seconds)
    return {"p50_ms": wall["p50_ms"], "p95_ms": wall["p95_ms"],
            "cpu_p50_ms": round(1000 * float(np.median(cpu)), 3)}  # fmt: skip


def _compare(cache: Any, matrix: Any, scope: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    """Exact and index paths over one scope, each query to both in turn."""
    times: dict[str, tuple[list[float], list[float]]] = {"exact": ([], []), "index": ([], [])}
    recalls: list[float] = []
    fallbacks = 0
    for query in queries:
        start, cpu = time.perf_counter(), time.thread_time()
        truth = scope[top_k(matrix.scores(scope, query), TOP)]
        times["exact"][0].append(time.perf_counter() - start)
        times["exact"][1].append(time.thread_time() - cpu)
        start, cpu = time.perf_counter(), time.thread_time()
        found = cache.candidates(matrix, scope, query, TOP)
        if found is None:
            fallbacks += 1
            found = scope
        chosen = found[top_k(matrix.scores(found, query), TOP)]
        times["index"][0].append(time.perf_counter() - start)
        times["index"][1].append(time.thread_time() - cpu)
        recalls.append(len(set(chosen.tolist()) & set(truth.tolist())) / TOP)
    exact, index = _timed(*times["exact"]), _timed(*times["index"])
    return {
        "exact": exact, "index": index,
        "index_over_exact_cpu_p50": round(index["cpu_p50_ms"] / exact["cpu_p50_ms"], 3),
        "index_recall_at_10": round(float(np.mean(recalls)), 4), "fallbacks": fallbacks,
    }  # fmt: skip


def run(db: Path, queries: int, seed: int = 7) -> dict[str, Any]:
    memory = erstwhile.open(str(db), embedder=HashEmbedder(384), background_jobs=False)
    dialect = memory.service.store.dialect  # type: ignore[attr-defined]
    cache = dialect._vectors
    conn = dialect.raw()
    (embedder_id,) = conn.execute(
        "SELECT embedder_id FROM vectors WHERE dimensions > 0 LIMIT 1"
    ).fetchone()
    with dialect.db.snapshot() as snap:
        matrix = cache.refresh(snap, embedder_id, 384)
    started = time.perf_counter()
    cache.build_index(matrix)  # the saved index when there is one
    built = round(time.perf_counter() - started, 1)
    cache.min_rows, cache.min_share = 1, 0.0  # the index path is always tried here
    rng = np.random.default_rng(seed)
    everyone = np.flatnonzero(matrix.position >= 0)
    picks = rng.choice(everyone, queries)
    noise = rng.normal(size=(queries, 384)).astype(np.float32)
    query_rows = matrix.gather(picks) + 0.03 * noise  # near a stored vector, not on it
    query_rows /= np.linalg.norm(query_rows, axis=1, keepdims=True)
    rows: list[dict[str, Any]] = []
    for share in SHARES:
        size = max(TOP, round(share * everyone.shape[0]))
        scope = np.sort(rng.choice(everyone, size, replace=False))
        row = _compare(cache, matrix, scope, query_rows)
        row = {"share": share, "scope": int(size), **row}
        log(f"  share {share}: scope {size}, CPU p50 exact {row['exact']['cpu_p50_ms']} ms,"
            f" index {row['index']['cpu_p50_ms']} ms ({row['index_over_exact_cpu_p50']}x),"
            f" recall {row['index_recall_at_10']}, fallbacks {row['fallbacks']}")  # fmt: skip
        rows.append(row)
    # the probe count, on the whole store (the unfiltered case)
    calibrated = matrix.index.probes.copy()
    depths: list[dict[str, Any]] = []
    for probes in PROBES:
        matrix.index.probes[:] = probes
        row = {"probes": probes, **_compare(cache, matrix, everyone, query_rows)}
        log(f"  probes {probes}: index CPU p50 {row['index']['cpu_p50_ms']} ms, recall "
            f"{row['index_recall_at_10']}")  # fmt: skip
        depths.append(row)
    matrix.index.probes[:] = calibrated
    memory.close()
    return {
        "what": "exact vs list index (IVF) in the SQLite vector lane, by scope size (random "
        "scopes), after the scope is decided; p50 over the queries, A B alternating",
        "store": str(db), "vectors": int(everyone.shape[0]), "queries": queries,
        "lists": int(matrix.index.centroids.shape[0]), "build_or_adopt_s": built,
        "calibrated_probes": dict(zip(ann.DEPTHS, calibrated.tolist(), strict=True)),
        "when": stamp(), "machine": machine(), "rows": rows,
        "unfiltered_by_probes": depths,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = run(args.db, args.queries)
    out = args.out or RESULTS / f"crossover_{size_label(result['vectors'] // 1000 * 1000)}.json"
    write_json(out, result)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()

"""Record-time travel: a ``known_at`` search in the past beside the same search now.

One store of ``size`` records written on a controllable clock: all of them at first,
then a tenth revised a day later (half superseded by a new record, half rewritten in
place with new content), then a twentieth soft-deleted. Each query runs on every lane
(lexical, semantic, hybrid) twice in turn — current, and ``known_at`` an instant
between the first writes and the revisions, when the revised records still read their
old versions — so a load swing hits both alike; the figure that matters is the ratio.

    python -m bench.known_at 10000 [--postgres URL] [--queries 40]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import erstwhile
from bench.common import latency, log, machine
from erstwhile.domain.time import format_instant
from erstwhile.embedding.hash import HashEmbedder

DAY = 86_400 * 1_000_000
START = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z
WORDS = [f"w{i}" for i in range(2000)]
LANES = ("lexical", "semantic", "hybrid")


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12))


def load(m: Any, size: int, rng: random.Random, clock: list[int]) -> int:
    """Writes the store; returns the past instant the known_at searches ask about."""
    for start in range(0, size, 1000):
        m.upsert("bench", [
            {"id": f"r{i}", "content": text(rng), "metadata": {"room": f"room-{i % 10}"}}
            for i in range(start, min(size, start + 1000))
        ])  # fmt: skip
        clock[0] += 1_000
    past = clock[0] + DAY // 2
    clock[0] += DAY
    revised = rng.sample(range(size), size // 10)
    for i in revised[1::2]:
        m.supersede("bench", f"r{i}", {"id": f"s{i}", "content": text(rng)})
        clock[0] += 10
    rewritten = revised[::2]  # in place, with new content: in batches, as an import would
    for start in range(0, len(rewritten), 1000):
        m.upsert("bench", [
            {"id": f"r{i}", "content": text(rng)} for i in rewritten[start : start + 1000]
        ])  # fmt: skip
        clock[0] += 10
    for i in rng.sample(range(size), size // 20):
        m.delete("bench", f"r{i}")
        clock[0] += 10
    return past


def run(size: int, queries: int, postgres: str | None, seed: int = 7) -> dict[str, Any]:
    """One run on a fresh store, removed afterwards: a temporary SQLite file, or (with
    ``postgres``) a schema of its own on that server, dropped at the end."""
    with tempfile.TemporaryDirectory(prefix="erstwhile-bench-known-at-") as workdir:
        if postgres is None:
            return _run(size, queries, str(Path(workdir) / "bench.db"), seed)
        import psycopg

        from erstwhile.store.postgres.connection import with_schema

        schema = f"known_at_{uuid.uuid4().hex[:8]}"  # "pg_" is PostgreSQL's own prefix
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
        try:
            return _run(size, queries, with_schema(postgres, schema), seed)
        finally:
            with psycopg.connect(postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


def _run(size: int, queries: int, target: str, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    m = erstwhile.open(
        target,
        embedder=HashEmbedder(dimensions=384),
        background_jobs=False,
    )
    clock = [START]
    m.service.clock = lambda: clock[0]
    t = time.perf_counter()
    past = load(m, size, rng, clock)
    log(f"known_at {size:,} ({m.service.store.backend}): loaded in {time.perf_counter() - t:.1f} s")
    texts = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(queries)]
    out: dict[str, Any] = {}
    for lane in LANES:
        for filtered in (False, True):
            times: dict[str, list[float]] = {"current": [], "known_at": []}
            for j, query in enumerate(texts):
                options: dict[str, Any] = {"ranking": lane, "top_k": 10}
                if filtered:
                    options["filter"] = {"room": f"room-{j % 10}"}
                order = ["current", "known_at"] if j % 2 else ["known_at", "current"]
                for mode in order:
                    extra = {"known_at": format_instant(past)} if mode == "known_at" else {}
                    begun = time.perf_counter()
                    m.search("bench", query, **options, **extra)
                    if j >= 3:  # warm-up
                        times[mode].append(time.perf_counter() - begun)
            name = lane + ("_filtered" if filtered else "")
            now, then = latency(times["current"]), latency(times["known_at"])
            out[name] = {
                "current": now,
                "known_at": then,
                "p50_ratio": round(then["p50_ms"] / now["p50_ms"], 2),
            }
            log(f"  {name}: {out[name]}")
    backend = m.service.store.backend
    m.close()
    return {"size": size, "queries": queries, "backend": backend, "machine": machine(),
            "cases": out}  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("size", type=int)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--postgres", help="a PostgreSQL URL (the run makes and drops a schema)")
    parser.add_argument("--out", help="write the result JSON here")
    args = parser.parse_args()
    result = run(args.size, args.queries, args.postgres)
    text_out = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text_out + "\n")
    print(text_out)

"""Ingest rate and search p50 per lane of one store on plain PostgreSQL and on Citus
(docs/postgres.md, "On Citus"): the same records (random words, a ``room`` of ten,
384-d hash embeddings) loaded through the public API in batches of 1,000, then the
same queries in each lane, the backends alternating query by query.

    python scripts/citus_figures.py --pg URL --citus URL [--size 10000] [--queries 30]

Each URL gets a schema of its own, dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from typing import Any

import psycopg

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.postgres.connection import with_schema

WORDS = [f"w{i}" for i in range(2_000)]
LANES: dict[str, dict[str, Any]] = {
    "lexical": {"ranking": "lexical"},
    "semantic": {"ranking": "semantic"},
    "hybrid": {"ranking": "hybrid"},
    "semantic, filtered": {"ranking": "semantic", "filter": {"room": "3"}},
    "hybrid, filtered": {"ranking": "hybrid", "filter": {"room": "3"}},
}


def schema_of(url: str) -> tuple[str, str]:
    schema = f"figures_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
    return schema, with_schema(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", required=True)
    parser.add_argument("--citus", required=True)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(7)
    rows = [
        {"id": f"r{i}", "content": " ".join(rng.choices(WORDS, k=12)),
         "metadata": {"room": str(i % 10)}}
        for i in range(args.size)
    ]  # fmt: skip
    queries = [" ".join(rng.choices(WORDS, k=2)) for _ in range(args.queries)]
    embedder = HashEmbedder(dimensions=384)
    stores: dict[str, tuple[str, str, erstwhile.Memory]] = {}
    try:
        for name, url in (("postgres", args.pg), ("citus", args.citus)):
            schema, target = schema_of(url)
            m = erstwhile.open(target, embedder=embedder, background_jobs=False)
            stores[name] = (url, schema, m)
            started = time.perf_counter()
            for start in range(0, len(rows), 1_000):
                m.upsert("ns", rows[start : start + 1_000])
            took = time.perf_counter() - started
            print(f"{name}: ingest {len(rows) / took:,.0f} rows/s ({took:.1f} s)", flush=True)
        for lane, options in LANES.items():
            times: dict[str, list[float]] = {name: [] for name in stores}
            for query in queries:
                for name, (_, _, m) in stores.items():
                    started = time.perf_counter()
                    m.search("ns", query, top_k=10, **options)
                    times[name].append((time.perf_counter() - started) * 1000)
            p50 = {name: statistics.median(t[1:]) for name, t in times.items()}
            each = ", ".join(f"{n} p50 {v:.1f} ms" for n, v in p50.items())
            ratio = p50["citus"] / p50["postgres"]
            print(f"{lane}: {each} (citus/postgres {ratio:.2f}x)", flush=True)
    finally:
        for url, schema, m in stores.values():
            m.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


if __name__ == "__main__":
    main()

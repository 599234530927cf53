"""Lexical search over SQLite's tail (documents not merged into postings yet, scored
from the process's copy of them) against the same store merged:
``python -m bench.fresh_postings --size 100000``.

Ingests ``size`` records of the speed data (bench.synth, batches of 1000), the last
batches after a merge, with merges held back, so the tail (``lexical_tail``) holds
nearly the most it holds between merges at that size
(:func:`~erstwhile.store.sql.lexical_merge.merge_due`); copies the file and merges the copy.
Then each store is opened anew and its first search timed (which copies the whole
tail), and every query goes to both stores in turn (the order alternating, so a load
swing hits both alike): the same hits and scores, and each one's p50.
"""

from __future__ import annotations

import math
import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import erstwhile
from bench.common import machine, sized_study
from bench.engines.erstwhile_engine import ErstwhileEngine
from bench.synth import generate
from erstwhile.store.sqlite import lexical_merge

BATCH = 1000
ROUNDS = 15


def run(size: int, seed: int) -> dict[str, Any]:
    data = generate(size, 10, seed)
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-fresh-"))
    try:
        engine = ErstwhileEngine(str(workdir / "fresh.db"), "fresh", {})
        engine.open()
        # batches whose documents stay in the tail: merge_due's bound at this size
        rows, most = lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX
        bound = min(most, max(rows, math.isqrt(rows * size // 4)))
        held = bound // BATCH
        for start in range(0, size, BATCH):
            if start == size - held * BATCH:  # from a merge on, the held batches only
                assert engine.memory is not None
                dialect = engine.memory.service.store.dialect
                dialect.db.write(partial(lexical_merge.merge_tail, dialect))
                lexical_merge.TAIL_ROWS = lexical_merge.TAIL_MAX = 10**12
            engine.ingest_batch(data, start, min(start + BATCH, size))
        lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX = rows, most
        assert engine.memory is not None
        engine.memory.close()
        shutil.copy(workdir / "fresh.db", workdir / "merged.db")
        with erstwhile.open(str(workdir / "merged.db"), embedder="none",
                            background_jobs=False) as m:  # fmt: skip
            m.service.store.db.write(partial(lexical_merge.merge_tail, m.service.store.dialect))
        stores = {
            name: erstwhile.open(str(workdir / f"{name}.db"), embedder="none",
                                 background_jobs=False)
            for name in ("fresh", "merged")
        }  # fmt: skip
        tail_rows = {
            name: m.service.store.db.conn().execute("SELECT count(*) FROM lexical_tail")
            .fetchone()[0]
            for name, m in stores.items()
        }  # fmt: skip
        first: dict[str, float] = {}
        for name, m in stores.items():  # the first search copies the whole tail
            t = time.perf_counter()
            m.search("bench", data.queries.texts[0], ranking="lexical", top_k=10)
            first[name] = time.perf_counter() - t
        seconds: dict[str, list[float]] = {name: [] for name in stores}
        same = True
        for n in range(ROUNDS):
            for query in data.queries.texts:
                names = list(stores) if n % 2 else list(reversed(stores))
                found = []
                for name in names:
                    t = time.perf_counter()
                    hits = stores[name].search("bench", query, ranking="lexical", top_k=10).hits
                    seconds[name].append(time.perf_counter() - t)
                    found.append([(hit.record.id, hit.score) for hit in hits])
                same = same and found[0] == found[1]
        for m in stores.values():
            m.close()
    finally:
        shutil.rmtree(workdir)
    p50 = {name: statistics.median(s) * 1000 for name, s in seconds.items()}
    return {
        "size": size,
        "seed": seed,
        "machine": machine(),
        "tail_rows": tail_rows,
        "same_hits_and_scores": same,
        "first_search_ms": {name: round(v * 1000, 1) for name, v in first.items()},
        "lexical_p50_ms": {name: round(v, 3) for name, v in p50.items()},
        "fresh_vs_merged": round(p50["fresh"] / p50["merged"], 3),
    }


def main() -> None:
    sized_study(__doc__, run, "fresh_postings")


if __name__ == "__main__":
    main()

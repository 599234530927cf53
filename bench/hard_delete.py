"""What purging the full-text index costs a hard delete on SQLite.

    python -m bench.hard_delete [--sizes 1000 10000 50000] [--deletes 10]

For each size: N records of 30 random words, then ``--deletes`` hard deletes timed
with the purge (FTS5 ``optimize``, what memstrata does) and without it (the purge
replaced by a no-op in this process only). Prints p50 of each and their ratio; both
are measured in the same run on the same file, so the ratio is what to quote.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import memstrata
from memstrata.store.sqlite.dialect import SqliteDialect


def measure(size: int, deletes: int) -> dict[str, float]:
    words = [f"w{i}" for i in range(20_000)]
    rnd = random.Random(size)
    with tempfile.TemporaryDirectory() as root:
        m = memstrata.open(os.path.join(root, "m.db"), embedder="none", background_jobs=False)
        for start in range(0, size, 500):
            m.upsert("b", [
                {"id": f"r{i}", "content": " ".join(rnd.choices(words, k=30))}
                for i in range(start, min(size, start + 500))
            ])  # fmt: skip
        purge = SqliteDialect.purge_forgotten
        ids = rnd.sample(range(size), 2 * deletes)
        result = {}
        try:
            for mode, chunk in (("without", ids[:deletes]), ("with", ids[deletes:])):
                SqliteDialect.purge_forgotten = (  # type: ignore[method-assign]
                    purge if mode == "with" else (lambda self, tx: None)
                )
                times = []
                for i in chunk:
                    started = time.perf_counter()
                    m.delete("b", f"r{i}", hard=True)
                    times.append(time.perf_counter() - started)
                result[mode] = statistics.median(times) * 1000
        finally:
            SqliteDialect.purge_forgotten = purge  # type: ignore[method-assign]
            m.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 50_000])
    parser.add_argument("--deletes", type=int, default=10)
    args = parser.parse_args()
    print("| records | hard delete without purge | with optimize | ratio |")
    print("|---|---|---|---|")
    for size in args.sizes:
        r = measure(size, args.deletes)
        print(f"| {size:,} | {r['without']:.2f} ms | {r['with']:.2f} ms "
              f"| {r['with'] / r['without']:.0f}x |")  # fmt: skip


if __name__ == "__main__":
    main()

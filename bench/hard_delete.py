"""What leaving no trace costs a hard delete on SQLite.

    python -m bench.hard_delete [--sizes 1000 10000 50000] [--deletes 10]

For each size: N records of 30 random words, then ``--deletes`` hard deletes timed
two ways in the same run on the same file: ``plain`` (no checkpoint) and ``erstwhile``
(the truncating WAL checkpoint after the delete, what erstwhile does). The checkpoint
is switched off by replacing the dialect's hook in this process only. Prints the p50
of each and the ratio to ``plain``: quote the ratios, the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from typing import Any

import erstwhile
from erstwhile.store.sqlite.dialect import SqliteDialect

MODES = ("plain", "erstwhile")


def _off(self: Any, *args: Any) -> None:
    return None


def measure(size: int, deletes: int) -> dict[str, float]:
    words = [f"w{i}" for i in range(20_000)]
    rnd = random.Random(size)
    scrub = SqliteDialect.scrub
    result = {}
    with tempfile.TemporaryDirectory() as root:
        m = erstwhile.open(os.path.join(root, "m.db"), embedder="none", background_jobs=False)
        for start in range(0, size, 500):
            m.upsert("b", [
                {"id": f"r{i}", "content": " ".join(rnd.choices(words, k=30))}
                for i in range(start, min(size, start + 500))
            ])  # fmt: skip
        m.delete("b", "r0", hard=True)
        ids = iter(rnd.sample(range(1, size), len(MODES) * deletes))
        try:
            for mode in MODES:
                SqliteDialect.scrub = scrub if mode != "plain" else _off  # type: ignore[method-assign]
                times = []
                for _ in range(deletes):
                    started = time.perf_counter()
                    m.delete("b", f"r{next(ids)}", hard=True)
                    times.append(time.perf_counter() - started)
                result[mode] = statistics.median(times) * 1000
        finally:
            SqliteDialect.scrub = scrub  # type: ignore[method-assign]
            m.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 50_000])
    parser.add_argument("--deletes", type=int, default=10)
    args = parser.parse_args()
    print("| records | plain | + checkpoint (erstwhile) |")
    print("|---|---|---|")
    for size in args.sizes:
        r = measure(size, args.deletes)
        print(f"| {size:,} | {r['plain']:.2f} ms | {r['erstwhile']:.2f} ms"
              f" ({r['erstwhile'] / r['plain']:.0f}x) |")  # fmt: skip


if __name__ == "__main__":
    main()

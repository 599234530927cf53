"""A fresh process's first search on a kept speed store, several times in a row.

    python -m bench.cold_search --db DIR/erstwhile-100000.db [--runs 5]
        [--out bench/results/cold_search_100k.json]

Each run is a new Python process that opens the file and searches once unfiltered
(the first search adopts the saved vector copy and maps the graph) and once filtered,
as the speed bench's ``cold_process`` does (bench/engines/erstwhile_engine.py); then
its resident memory. The page cache is left as it is (it is shared with the other
processes on the machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.common import RESULTS, log, machine, stamp, write_json
from bench.engines.erstwhile_engine import _COLD, NAMESPACE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "cold_search_100k.json")
    args = parser.parse_args(argv)
    query = np.random.default_rng(0).normal(size=384)
    vector = json.dumps((query / np.linalg.norm(query)).tolist())
    runs = []
    for _ in range(args.runs):
        done = subprocess.run([sys.executable, "-c", _COLD, str(args.db), vector, NAMESPACE],
                              capture_output=True, text=True, check=True)  # fmt: skip
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        log(f"  {runs[-1]}")
    write_json(args.out, {
        "what": "a fresh process's first search (unfiltered, through the saved copy), "
        "then a filtered one, and its resident memory; one row per process, in order",
        "store": str(args.db), "when": stamp(), "machine": machine(), "runs": runs,
        "first_search_s": [round(r["first_search_s"], 3) for r in runs],
    })  # fmt: skip
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()

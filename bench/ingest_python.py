"""The Python side of ingest with precomputed vectors, this tree against another, in
one sitting: ``python -m bench.ingest_python --before OTHER/src [--size 100000]
[--pg-url URL]``.

1. SQLite ingest, side by side (:mod:`bench.ingest`: batches of 1,000, the engines'
   batches interleaved), with each vector as a list of floats (the JSON shape: the
   headline) and as a NumPy float32 row.
2. The CPU milliseconds of a 1,000-record batch spent in each Python phase (parsing
   with the vectors' check, the service's checks, the store's per-record work, the
   lexical flush and commit), for both trees, alternating, on a 10k store.
3. With ``--pg-url``: ``bench.backends --variants postgres`` for both trees, one after
   the other (its ingest rows/s; the search figures are in the files it writes).

Writes ``bench/results/ingest_{size}k_python.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import ingest
from bench.common import RESULTS, log, machine, write_json

REPO = Path(__file__).resolve().parents[1]

_SPLIT = r"""
import collections, functools, json, shutil, sys, tempfile, time
from bench.engines.erstwhile_engine import ErstwhileEngine
from bench.synth import generate
import erstwhile.memory as mm
from erstwhile import service
from erstwhile.store.sql import writes
spent = collections.Counter()
def timed(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    def g(*a, **k):
        s = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[label] += time.process_time() - s
    setattr(owner, name, g)
timed(mm, "with_vectors", "parse and vector check")
timed(service.Service, "ingest", "service.ingest")
timed(writes.Writes, "upsert", "store per-record work")
timed(writes.Writes, "flush", "lexical flush")
size, extra = 10_000, 5_000
data = generate(size + extra, 10, 7)
where = tempfile.mkdtemp()
engine = ErstwhileEngine(where + "/x.db", "erstwhile", {})
engine.open()
for s in range(0, size, 1000):
    engine.ingest_batch(data, s, s + 1000)
spent.clear()
cpu = time.process_time()
for s in range(size, size + extra, 1000):
    engine.ingest_batch(data, s, s + 1000)
cpu = time.process_time() - cpu
engine.close()
shutil.rmtree(where)
k = extra // 1000
out = {name: round(v / k * 1000, 1) for name, v in spent.items()}
out["service checks"] = round(out["service.ingest"] - out["store per-record work"]
                              - out["lexical flush"], 1)
out["batch cpu"] = round(cpu / k * 1000, 1)
print(json.dumps(out))
"""


def split(src: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(REPO)]))
    done = subprocess.run(
        [sys.executable, "-c", _SPLIT], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def pg_ingest(src: Path, url: str, size: int, out: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(REPO)]))
    subprocess.run(
        [sys.executable, "-m", "bench.backends", "--size", str(size), "--queries", "20",
         "--wide-queries", "5", "--variants", "postgres", "--pg-url", url, "--out", str(out)],
        env=env, check=True, cwd=REPO,
    )  # fmt: skip
    found: dict[str, Any] = json.loads(out.read_text())["ingest"]["postgres"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="another tree's src")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pg-url")
    parser.add_argument("--out", type=Path, help="where to write the result (default: in results/)")
    args = parser.parse_args()
    this = REPO / "src"
    result: dict[str, Any] = {"size": args.size, "before": str(args.before)}
    for shape in ("list", "array"):
        log(f"SQLite ingest, vectors as {shape}s")
        result[f"sqlite_{shape}"] = ingest.run(args.size, 7, args.before, shape)
    log("Python CPU split per batch")
    splits: dict[str, list[dict[str, float]]] = {"this tree": [], "before": []}
    for _ in range(2):
        splits["this tree"].append(split(this))
        splits["before"].append(split(args.before))
    result["python_cpu_ms_per_batch"] = {  # the lower of two runs of each, per phase
        name: {phase: min(run[phase] for run in runs) for phase in runs[0]}
        for name, runs in splits.items()
    }
    if args.pg_url:
        result["postgres_ingest"] = {
            name: pg_ingest(src, args.pg_url, args.size,
                            RESULTS / f"backends_{args.size // 1000}k_postgres_{key}.json")
            for name, key, src in (("this tree", "python", this),
                                   ("before", "python_before", args.before))
        }  # fmt: skip
    result["machine"] = machine()
    result["load_average_end"] = os.getloadavg()
    log(json.dumps(result, indent=2))
    write_json(args.out or RESULTS / f"ingest_{args.size // 1000}k_python.json", result)


if __name__ == "__main__":
    main()

"""Writers side by side: records/s of 1, 2 (and 4) writer processes upserting into one
namespace of one PostgreSQL store, each its own records, at once.

    python -m bench.writers --pg-url URL [--writers 1,2,4] [--per 10000] [--base 10000]
        [--rounds 3] [--before OTHER_CHECKOUT/src] [--out bench/results/writers_pg.json]

Each run gets a fresh schema. One process first writes ``--base`` records (untimed: the
namespace then has a term table and statistics, as a store in use has); then ``W``
writer processes each make their ``--per`` records, wait until all are ready, and write
them back to back. The records are one ``bench.synth`` data set (seed 7) of which the
base and each writer write a slice of their own, so the writers share one vocabulary as
a namespace's writers do; vectors are given as NumPy rows; plain records unless
``--supersedes``; batches of 1,000, one transaction each. The figure is all the
writers' records over the time from the first one's start to the last one's end.

The writer counts alternate within a round (1, 2, 4, then 4, 2, 1, ...) and a tree given
with ``--before`` (its ``src``, first on the path) runs beside this one in every round,
so a load swing on this shared machine hits each alike. While the writers run, their
server sessions are sampled every 10 ms (``pg_stat_activity``): what the active ones
waited on (``running``: nothing), the share waiting on a lock, and the statements they
waited in. After each run the
lexical counts are checked against the postings (``integrity()``'s full-text check).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, log, machine, stamp, write_json

REPO = Path(__file__).resolve().parents[1]
BATCH = 1000
NAMESPACE = "writers"
APPLICATION = "erstwhile-bench-writer"


def worker(url: str, first: int, per: int, total: int, supersedes: bool) -> None:
    """Makes its records (``first``..``first + per`` of the run's ``total``: every
    writer's records come from one data set, so they share its vocabulary, as writers
    of one namespace do), says it is ready, writes them when told; answers its times."""
    import erstwhile
    from bench.engines.erstwhile_engine import QueryTableEmbedder, records
    from bench.synth import generate

    data = generate(total, 1, 7)
    batches = []
    for start in range(first, first + per, BATCH):
        chunk = records(data, start, min(start + BATCH, first + per), arrays=True)
        for record in chunk:  # a supersession of a record another writer writes: left out
            old = record.get("supersedes")
            if old is not None and (not supersedes or data.index_of(old[0]) < first):
                del record["supersedes"]
        batches.append(chunk)
    memory = erstwhile.open(url, embedder=QueryTableEmbedder(384, {}), background_jobs=False)
    print(json.dumps({"ready": True, "erstwhile": erstwhile.__file__}), flush=True)
    sys.stdin.readline()
    seconds = []
    began = time.time()
    for chunk in batches:
        t = time.perf_counter()
        memory.upsert(NAMESPACE, chunk)
        seconds.append(time.perf_counter() - t)
    ended = time.time()
    memory.close()
    print(json.dumps({"start": began, "end": ended, "batches": seconds}), flush=True)


def _spawn(
    src: Path | None, url: str, first: int, per: int, total: int, supersedes: bool
) -> subprocess.Popen[str]:
    env = dict(os.environ)
    path = [str(REPO)] if src is None else [str(src), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen(
        [sys.executable, "-m", "bench.writers", "--worker", "--url", url, "--first", str(first),
         "--per", str(per), "--total", str(total), *(["--supersedes"] if supersedes else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a writer exited with {proc.wait()}")
    return dict(json.loads(line))


class Sampler:
    """Samples the writers' active server sessions until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: Counter[str] = Counter()
        self.waits: Counter[str] = Counter()
        self.active = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT wait_event_type, wait_event, left(query, 90) FROM pg_stat_activity"
                    " WHERE application_name = %s AND state = 'active'",
                    (APPLICATION,),
                ).fetchall()
                for kind, event, query in rows:
                    self.active += 1
                    self.samples["running" if kind is None else f"{kind}:{event}"] += 1
                    if kind == "Lock":
                        self.waits[" ".join(str(query).split())] += 1
                time.sleep(0.01)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        waiting = sum(n for name, n in self.samples.items() if name.startswith("Lock:"))
        return {
            "active_samples": self.active,
            "lock_wait_share": round(waiting / self.active, 3) if self.active else 0.0,
            "samples": dict(self.samples.most_common()),
            "waited_in": dict(self.waits.most_common(3)),
        }


def one_run(
    base_url: str, src: Path | None, writers: int, per: int, base: int, supersedes: bool
) -> dict[str, Any]:
    import psycopg

    from erstwhile.store.postgres.connection import with_schema

    schema = f"writers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # in public: every schema's
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
    url = with_schema(base_url, schema) + f"&application_name={APPLICATION}"
    total = base + writers * per
    try:
        if base:
            loader = _spawn(src, url, 0, base, total, supersedes)
            _answer(loader)
            assert loader.stdin is not None
            loader.stdin.write("go\n")
            loader.stdin.flush()
            _answer(loader)
            loader.wait()
        procs = [_spawn(src, url, base + k * per, per, total, supersedes)
                 for k in range(writers)]  # fmt: skip
        loaded = {_answer(proc)["erstwhile"] for proc in procs}
        sampler = Sampler(base_url)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = [_answer(proc) for proc in procs]
        waits = sampler.stop()
        for proc in procs:
            proc.wait()
        wall = max(a["end"] for a in answers) - min(a["start"] for a in answers)
        batches = [s for a in answers for s in a["batches"]]
        with psycopg.connect(url, autocommit=True) as conn:
            exact = _exact(conn)
        return {
            "writers": writers,
            "records": writers * per,
            "wall_s": round(wall, 3),
            "records_per_s": round(writers * per / wall, 1),
            "batch_ms": {
                "p50": round(1000 * float(np.percentile(batches, 50)), 1),
                "p99": round(1000 * float(np.percentile(batches, 99)), 1),
            },
            "lexical_counts_exact": exact,
            "erstwhile": sorted(loaded),
            **waits,
        }
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


def _exact(conn: Any) -> bool:
    """Whether the namespace's statistics and term counts are those of its postings."""
    from erstwhile.store.sql import lexical_index

    found = lexical_index.integrity(lambda sql: conn.execute(sql).fetchall(), documents=True)
    if found.problems:
        log(f"  lexical counts off: {found.problems}")
    return not found.problems


def revision(src: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=os.environ.get("ERSTWHILE_BENCH_PG_URL"))
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--per", type=int, default=10_000, help="records per writer")
    parser.add_argument("--base", type=int, default=10_000, help="records written first")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--supersedes",
        action="store_true",
        help="keep the data's supersessions (~10 %%; else plain records)",
    )
    parser.add_argument("--before", type=Path, help="another tree's src, run beside this one")
    parser.add_argument("--before-label", help="names --before (an export has no revision)")
    parser.add_argument("--label", help="names this tree (an export has no revision)")
    parser.add_argument("--out", type=Path, default=RESULTS / "writers_pg.json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--total", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.url, args.first, args.per, args.total, args.supersedes)
        return
    if not args.pg_url:
        parser.error("--pg-url (or ERSTWHILE_BENCH_PG_URL) names the PostgreSQL to write to")
    counts = [int(n) for n in args.writers.split(",")]
    trees: dict[str, Path | None] = {f"{args.label or revision(REPO)} (this tree)": None}
    if args.before is not None:
        trees[f"{args.before_label or revision(args.before)} (before)"] = args.before
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {
        name: {n: [] for n in counts} for name in trees
    }
    began = machine()
    for r in range(args.rounds):
        order = counts if r % 2 == 0 else counts[::-1]
        for n in order:
            names = list(trees) if (r + n) % 2 == 0 else list(trees)[::-1]
            for name in names:
                found = one_run(args.pg_url, trees[name], n, args.per, args.base, args.supersedes)
                runs[name][n].append(found)
                log(f"round {r + 1}, {name}, {n} writer(s): {found['records_per_s']:,.0f}"
                    f" records/s, lock waits {found['lock_wait_share']:.0%},"
                    f" exact {found['lexical_counts_exact']}")  # fmt: skip
    summary: dict[str, Any] = {}
    for name, by_count in runs.items():
        medians = {n: float(np.median([f["records_per_s"] for f in found]))
                   for n, found in by_count.items()}  # fmt: skip
        one = medians.get(1)
        summary[name] = {
            str(n): {
                "records_per_s_median": round(rate, 1),
                "vs_one_writer": round(rate / one, 3) if one else None,
                "lock_wait_share_median": float(
                    np.median([f["lock_wait_share"] for f in by_count[n]])
                ),
                "all_exact": all(f["lexical_counts_exact"] for f in by_count[n]),
            }
            for n, rate in medians.items()
        }
    result = {
        "stamp": stamp(),
        "command": " ".join(["python -m bench.writers", *sys.argv[1:]]),
        "per_writer": args.per,
        "base": args.base,
        "supersedes": args.supersedes,
        "batch": BATCH,
        "machine_at_start": began,
        "machine_at_end": machine(),
        "summary": summary,
        "runs": {name: {str(n): found for n, found in by.items()} for name, by in runs.items()},
    }
    write_json(args.out, result)
    log(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

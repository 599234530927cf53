"""``python -m bench run --size quick|full`` — every figure of bench/results in one command.

    python -m bench run --size quick       10k speed, all of locomo-dev, time-awareness
    python -m bench run --size full        10k and 100k speed, the same quality runs
    python -m bench run --size smoke       2k speed, one conversation: checks the harness
    python -m bench report                 re-renders summary.md and plots from the JSON

Options: ``--only speed,quality,time,cold``, ``--engines pg,chroma,lance,sqlitevec``
(erstwhile on SQLite and the numpy floor always run), ``--results DIR``, ``--store DIR``
(erstwhile's speed store kept there and reused by the next run of the same size),
``--speed-size N`` (only that one of the plan's speed sizes).
"""

from __future__ import annotations

import os

# One thread per pool, before numpy or torch load: on a small shared machine a
# second BLAS/OpenMP thread spins against the other processes and makes a 0.4 ms
# matrix-vector product take 3-10 ms (measured; see bench/README.md). It applies
# alike to erstwhile, the floor and the local embedding model.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.common import (  # noqa: E402
    RESULTS,
    locomo_path,
    log,
    machine,
    size_label,
    stamp,
    write_json,
)

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"speed": [2_000], "queries": 20, "conversations": 1, "subjects": 40},
    "quick": {"speed": [10_000], "queries": 100, "conversations": None, "subjects": 500},
    # 100k: 60 queries per case, so the whole full run stays within 30 minutes here
    "full": {
        "speed": [10_000, 100_000],
        "queries": 100,
        "queries_100k": 60,
        "conversations": None,
        "subjects": 500,
    },
    # 1M records, erstwhile and the floor (--only speed --engines none): ingest rate,
    # bytes per record on disk, a fresh process's first search and resident memory
    "1m": {
        "speed": [1_000_000],
        "queries": 20,
        "queries_100k": 20,
        "conversations": 1,
        "subjects": 40,
    },
}
PARTS = ("speed", "quality", "time", "cold")


def run(args: argparse.Namespace) -> int:
    from bench import report

    plan = SIZES[args.size]
    parts = set(args.only.split(",")) if args.only else set(PARTS)
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"--only: unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    engines = (
        set(args.engines.split(",")) if args.engines else {"pg", "chroma", "lance", "sqlitevec"}
    )
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    meta = {
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "size": args.size,
        "when": stamp(),
        "machine": machine(),
        "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
    }
    if "speed" in parts:
        from bench.speed import run_speed

        sizes = [int(args.speed_size)] if args.speed_size else plan["speed"]
        for size in sizes:
            t = time.perf_counter()
            queries = plan["queries_100k"] if size >= 100_000 else plan["queries"]
            store = Path(args.store) if args.store else None
            speed = run_speed(size, queries, wanted=engines, store=store)
            write_json(results / f"speed_{size_label(size)}.json", speed)
            timings[f"speed_{size_label(size)}"] = round(time.perf_counter() - t, 1)
    if "quality" in parts:
        path = locomo_path()
        if path.exists():
            from bench.locomo import run_locomo

            t = time.perf_counter()
            write_json(results / "locomo.json",
                       run_locomo(path, conversations=plan["conversations"]))  # fmt: skip
            timings["locomo"] = round(time.perf_counter() - t, 1)
        else:
            log(f"LoCoMo skipped: {path} not found (set ERSTWHILE_LOCOMO)")
            meta["locomo_skipped"] = f"{path} not found"
    if "time" in parts:
        from bench.timeaware import run_timeaware

        t = time.perf_counter()
        write_json(results / "time_awareness.json", run_timeaware(plan["subjects"]))
        timings["time_awareness"] = round(time.perf_counter() - t, 1)
    if "cold" in parts:
        from bench.coldcli import run_coldcli

        t = time.perf_counter()
        write_json(results / "cold_cli.json", run_coldcli())
        timings["cold_cli"] = round(time.perf_counter() - t, 1)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["part_seconds"] = timings
    meta["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(results / "run.json", meta)
    summary = report.render(results)
    log(f"wrote {summary} and plots in {meta['seconds']} s")
    print(summary.read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the benchmarks and write results")
    run_parser.add_argument("--size", choices=sorted(SIZES), default="quick")
    run_parser.add_argument("--only", help="comma-separated parts: speed, quality, time, cold")
    run_parser.add_argument(
        "--engines", help="comma-separated: pg, chroma, lance, sqlitevec (default: all)"
    )
    run_parser.add_argument("--results", default=str(RESULTS), help="output directory")
    run_parser.add_argument(
        "--store", help="keep erstwhile's speed store in this directory, and reuse it"
    )
    run_parser.add_argument(
        "--speed-size", help="only this one of the plan's speed sizes (e.g. 100000)"
    )
    report_parser = commands.add_parser("report", help="re-render summary.md and plots")
    report_parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args)
    from bench import report

    print(report.render(Path(args.results)).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

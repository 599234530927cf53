"""Two source trees' search speed, compared in one sitting: ``python -m bench.abba``.

    python -m bench.abba --before /work/wt/before --after . --rounds 5 --bench-rounds 5

Two measurements, both interleaved so that a load swing on a shared machine hits the
two trees alike:

- ``paired``: one worker process per tree (its ``src`` first on the path), each with
  its own 10k SQLite store built from the speed bench's data. Query j of a case goes
  to both workers in turn (the order alternating), every query of every case, for
  ``--rounds`` rounds. Each worker times its own ``search`` call: wall time and the
  process's CPU time (which load from other processes disturbs less). The workers'
  answers are compared id by id.
- ``bench``: the speed bench itself (``python -m bench run --size quick --only speed
  --engines none``) run from each tree in the order B A A B, B A A B, ...
  (``--bench-rounds`` runs each); per case erstwhile's p50 as a ratio to the numpy
  floor's p50 in the same run.

Both report, per case, the medians of each tree and the change of the median in per
cent. One tree's bench code (this one's) drives the paired runs: the bench's data,
queries and engine must be the same in both trees, which the workers check.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def git_commit(tree: Path) -> str:
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                          text=True)  # fmt: skip
    return done.stdout.strip() or "unknown"


def tree_env(tree: Path) -> dict[str, str]:
    env = {**os.environ, **THREADS, "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(REPO)])
    return env


# -- the worker: one tree's store, answering one query at a time ------------------------


def worker(size: int, queries: int, seed: int) -> None:
    """Reads ``case index`` lines on stdin; answers each with a JSON line of its wall
    and CPU seconds and the hit ids."""
    import erstwhile
    from bench.engines import case_queries
    from bench.engines.erstwhile_engine import ErstwhileEngine
    from bench.synth import generate

    data = generate(size, queries, seed)
    table: dict[str, Any] = {}
    for j, text in enumerate(data.queries.texts):
        table.setdefault(text, data.queries.vectors[j])
    by_case = case_queries(data, table)
    with tempfile.TemporaryDirectory(prefix="erstwhile-bench-abba-") as workdir:  # its store goes
        engine = ErstwhileEngine(str(Path(workdir) / "erstwhile.db"), "erstwhile", table)
        engine.ingest(data, 1000)
        print(json.dumps({"ready": True, "erstwhile": erstwhile.__file__}), flush=True)
        for line in sys.stdin:
            case, index = line.split()
            query = by_case[case][int(index)]
            cpu, wall = time.process_time(), time.perf_counter()
            found = engine.search(query)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(json.dumps({"wall": wall, "cpu": cpu, "ids": found}), flush=True)
        engine.close()


class Worker:
    def __init__(self, tree: Path, size: int, queries: int, seed: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.abba", "--worker", str(size), str(queries), str(seed)],
            cwd=str(REPO), env=tree_env(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip

    def ready(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.process.args!r} exited ({self.process.wait()})")
        return str(json.loads(line)["erstwhile"])

    def ask(self, case: str, index: int) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{case} {index}\n")
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def change(before: float, after: float) -> float:
    return round((after / before - 1) * 100, 1)


def paired(trees: dict[str, Path], rounds: int, size: int, queries: int) -> dict[str, Any]:
    from bench.engines import CASES

    workers = {name: Worker(tree, size, queries, 7) for name, tree in trees.items()}
    try:
        loaded = {name: w.ready() for name, w in workers.items()}
        times: dict[str, dict[str, dict[str, list[float]]]] = {
            case: {name: {"wall": [], "cpu": []} for name in trees} for case in CASES
        }
        per_round: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
        differing = 0
        names = list(trees)
        for r in range(rounds):
            for case in CASES:
                this_round: dict[str, list[float]] = {name: [] for name in names}
                for j in range(queries):
                    order = names if (j + r) % 2 == 0 else names[::-1]
                    answers = {name: workers[name].ask(case, j) for name in order}
                    if len({tuple(a["ids"]) for a in answers.values()}) > 1:
                        differing += 1
                    for name, answer in answers.items():
                        times[case][name]["wall"].append(answer["wall"])
                        times[case][name]["cpu"].append(answer["cpu"])
                        this_round[name].append(answer["wall"])
                per_round[case].append(
                    {f"{n}_wall_p50_ms": round(statistics.median(v) * 1000, 4)
                     for n, v in this_round.items()}
                )  # fmt: skip
    finally:
        for w in workers.values():
            w.close()
    cases: dict[str, Any] = {}
    for case in CASES:
        entry: dict[str, Any] = {}
        for kind in ("wall", "cpu"):
            med = {n: statistics.median(times[case][n][kind]) * 1000 for n in names}
            entry[f"{kind}_p50_ms"] = {n: round(m, 4) for n, m in med.items()}
            entry[f"{kind}_change_pct"] = change(med[names[0]], med[names[1]])
        entry["per_round"] = per_round[case]
        cases[case] = entry
    return {
        "method": (
            "one worker process per tree, each with its own store of the same data; query j "
            "to both in turn (order alternating), every query of every case, per round; "
            "p50 over all rounds of each worker's own timing (wall: perf_counter; cpu: "
            "process_time)"
        ),
        "rounds": rounds,
        "size": size,
        "queries_per_case": queries,
        "erstwhile_loaded_from": loaded,
        "queries_answered_differently": differing,
        "cases": cases,
    }


#: The speed bench's result files each ``--bench-size`` writes.
BENCH_FILES = {"quick": ("speed_10k.json",), "full": ("speed_10k.json", "speed_100k.json")}


def bench_run(tree: Path, size: str) -> dict[str, dict[str, Any]]:
    """One run of the speed bench from ``tree``: its result per file written."""
    with tempfile.TemporaryDirectory(prefix="erstwhile-bench-abba-run-") as out:
        command = [sys.executable, "-m", "bench", "run", "--size", size, "--only", "speed",
                   "--engines", "none", "--results", out]  # fmt: skip
        done = subprocess.run(command, cwd=str(tree), env=tree_env(tree).copy()
                              | {"PYTHONPATH": str(tree / "src")}, capture_output=True,
                              text=True)  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"bench in {tree} failed: {done.stderr[-2000:]}")
        return {name: json.loads((Path(out) / name).read_text()) for name in BENCH_FILES[size]}


def _figures(result: dict[str, Any], cases: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Per figure of one result file, erstwhile's value and the ratio compared (lower is
    better): each search case's p50 over the floor's p50 of the same run; ingest, as
    seconds per record (its records/s inverted); a fresh process's first search."""
    from bench.speed import ERSTWHILE

    figures: dict[str, tuple[float, float]] = {}
    for case in cases:
        entries = result["cases"][case]
        floor = next(v for k, v in entries.items() if k.startswith("floor"))
        ours = entries[ERSTWHILE]["p50_ms"]
        figures[case] = (ours, ours / floor["p50_ms"])
    ingest = result["ingest"][ERSTWHILE]
    figures["ingest_s_per_1k_records"] = (1000 / ingest["records_per_s"],) * 2
    cold = ingest.get("cold_process", {}).get("first_search_s")
    if cold is not None:
        figures["cold_first_search_s"] = (cold, cold)
    return figures


def bench(trees: dict[str, Path], rounds: int, size: str) -> dict[str, Any]:
    from bench.engines import CASES

    before, after = list(trees)
    order: list[str] = []
    for r in range(rounds):
        order += [before, after] if r % 2 == 0 else [after, before]
    ratios: dict[str, dict[str, float]] = {}
    values: dict[str, dict[str, float]] = {}
    seen = {before: 0, after: 0}
    for name in order:
        seen[name] += 1
        label = f"{name}{seen[name]}"
        for file, result in bench_run(trees[name], size).items():
            for figure, (value, ratio) in _figures(result, CASES).items():
                key = f"{file.removesuffix('.json')}:{figure}"
                ratios.setdefault(key, {})[label] = round(ratio, 4)
                values.setdefault(key, {})[label] = value
        print(f"  bench {label}: " + ", ".join(f"{k} {v[label]}" for k, v in ratios.items()),
              file=sys.stderr, flush=True)  # fmt: skip
    cases: dict[str, Any] = {}
    for key, per_run in ratios.items():
        med = {
            n: statistics.median(v for k, v in per_run.items() if k.rstrip("0123456789") == n)
            for n in (before, after)
        }
        cases[key] = {
            "ratio_per_run": per_run,
            f"median_{before}": round(med[before], 4),
            f"median_{after}": round(med[after], 4),
            "change_pct": change(med[before], med[after]),
            "value_per_run": values[key],
        }
    return {
        "method": (
            "the speed bench from each tree, PYTHONPATH=<tree>/src, in the order "
            + " ".join(order)
            + "; per search case erstwhile (SQLite) p50 / floor p50 of the same run, ingest"
            " seconds per 1,000 records and a fresh process's first search as measured;"
            " median per tree"
        ),
        "command": f"python -m bench run --size {size} --only speed --engines none",
        "runs_each": rounds,
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    summary = __doc__.split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench.abba", description=summary)
    parser.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, help="the tree measured first (a checkout)")
    parser.add_argument("--after", type=Path, default=REPO)
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds (0: skip)")
    parser.add_argument("--bench-rounds", type=int, default=5, help="speed-bench runs per tree")
    parser.add_argument("--bench-size", choices=sorted(BENCH_FILES), default="quick",
                        help="the speed bench's --size (full: 10k and 100k)")  # fmt: skip
    parser.add_argument("--size", type=int, default=10_000, help="the paired stores' records")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    if args.before is None:
        parser.error("--before is required")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    started = time.time()
    result: dict[str, Any] = {
        "what": "search speed of two trees, interleaved in one sitting (SQLite store)",
        "reproduce": "python -m bench.abba --before <tree> --after <tree> "
        f"--rounds {args.rounds} --bench-rounds {args.bench_rounds} --size {args.size}"
        f" --bench-size {args.bench_size}",
        "commits": {name: git_commit(tree) for name, tree in trees.items()},
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }
    if args.rounds:
        result["paired"] = paired(trees, args.rounds, args.size, args.queries)
        print("  paired: " + json.dumps({c: (v["wall_change_pct"], v["cpu_change_pct"])
                                         for c, v in result["paired"]["cases"].items()}),
              file=sys.stderr, flush=True)  # fmt: skip
    if args.bench_rounds:
        result["bench"] = bench(trees, args.bench_rounds, args.bench_size)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["seconds"] = round(time.time() - started, 1)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

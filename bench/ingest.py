"""Ingest with precomputed vectors, as the speed bench times it, for several engines in
one sitting: ``python -m bench.ingest --size 100000 [--before SRC]``.

Each engine runs in a process of its own on the same generated data (bench.synth,
batches of 1000, one transaction each): erstwhile of this tree, erstwhile of another
tree (``--before``: its ``src`` directory, e.g. the main branch's, put first on the
path), this tree in a process that calls ``erstwhile.tune_process()`` first (``--tuned``:
what the CLI and the server run; the plain engine is what ``erstwhile.open()`` embeds),
and raw sqlite-vec + FTS5. Batch j goes to every engine before batch j + 1, the
order rotating, so a load swing on this shared machine hits them alike. The timed part
is what the speed bench times (``write_s``): erstwhile's ``upsert`` calls, sqlite-vec's
transactions; building each batch's input is not timed.

Taking turns leaves each engine idle while the others write, and work an engine does
beside its writes (erstwhile's checkpoints and merges) then costs its writes nothing.
``--alone`` has each engine write all its batches back to back instead, one engine after
the other: the gap between two batches is only the building of the next one's input,
as for a client that sends batches as fast as it can make them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, log, machine, write_json

REPO = Path(__file__).resolve().parents[1]
BATCH = 1000
#: The end of the name of an engine whose process calls ``erstwhile.tune_process()``.
TUNED = "(this tree, tune_process)"


def worker(kind: str, size: int, seed: int, path: str, arrays: bool = False) -> None:
    """Holds one engine; ingests the batch each line of stdin names, answers its seconds."""
    from bench.synth import generate

    if kind.endswith(TUNED):
        import erstwhile

        erstwhile.tune_process()  # before any database opens
    data = generate(size, 10, seed)
    if kind == "sqlitevec":
        from bench.engines.sqlitevec_engine import SqliteVecEngine

        engine: Any = SqliteVecEngine(path)
    else:
        from bench.engines.erstwhile_engine import ErstwhileEngine

        engine = ErstwhileEngine(path, kind, {})
        engine.open()
    import erstwhile

    print(json.dumps({"ready": True, "erstwhile": erstwhile.__file__}), flush=True)
    for line in sys.stdin:
        start = int(line)
        stop = min(start + BATCH, size)
        seconds = (
            engine.ingest_batch(data, start, stop, arrays=True)
            if arrays and kind != "sqlitevec"
            else engine.ingest_batch(data, start, stop)
        )
        print(json.dumps({"seconds": seconds}), flush=True)
    engine.close()


def _spread(seconds: list[float]) -> dict[str, float]:
    """Median, 99th percentile and most of ``seconds``, in milliseconds."""
    p50, p99 = np.percentile(seconds, [50, 99])
    return {"p50": round(1000 * p50, 1), "p99": round(1000 * p99, 1),
            "max": round(1000 * max(seconds), 1)}  # fmt: skip


def revision(src: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def run(
    size: int, seed: int, before: Path | None, vectors: str = "list", label: str | None = None,
    *, alone: bool = False, tuned: bool = False, peers: bool = True,
) -> dict[str, Any]:  # fmt: skip
    engines: dict[str, Path | None] = {f"erstwhile {revision(REPO)} (this tree)": None}
    if tuned:
        engines[f"erstwhile {revision(REPO)} {TUNED}"] = None
    if before is not None:
        engines[f"erstwhile {label or revision(before)} (before)"] = before
    if peers:
        engines["sqlite-vec + FTS5"] = None
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-ingest-"))
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for n, (name, src) in enumerate(engines.items()):
            env = dict(os.environ)
            path = [str(REPO)] if src is None else [str(src), str(REPO)]
            env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
            kind = "sqlitevec" if name.startswith("sqlite-vec") else name
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "bench.ingest", "--worker", kind, "--size", str(size),
                 "--seed", str(seed), "--path", str(workdir / f"e{n}.db"),
                 "--vectors", vectors],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
        loaded = {}
        for name, proc in procs.items():
            assert proc.stdout is not None
            loaded[name] = json.loads(proc.stdout.readline())["erstwhile"]
        seconds = dict.fromkeys(procs, 0.0)
        batches: dict[str, list[float]] = {name: [] for name in procs}
        names = list(procs)
        starts = range(0, size, BATCH)
        if alone:  # each engine's batches back to back
            turns = [(j, [name]) for name in names for j in range(len(starts))]
        else:  # batch j to every engine, the order rotating
            turns = [(j, names[j % len(names) :] + names[: j % len(names)])
                     for j in range(len(starts))]  # fmt: skip
        started = time.perf_counter()
        for j, order in turns:
            start = starts[j]
            for name in order:
                proc = procs[name]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{start}\n")
                proc.stdin.flush()
                took = json.loads(proc.stdout.readline())["seconds"]
                seconds[name] += took
                batches[name].append(took)
            if (j + 1) % 10 == 0:
                rates = {k: round(BATCH * len(v) / seconds[k]) for k, v in batches.items() if v}
                log(f"  {start + BATCH:,} records: {rates}")
        wall = time.perf_counter() - started
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
        for f in workdir.iterdir():
            f.unlink()
        workdir.rmdir()
    ours = next(iter(seconds))
    rates = {name: size / s for name, s in seconds.items()}
    return {
        "size": size,
        "seed": seed,
        "batch": BATCH,
        "vectors": vectors,
        "turns": "alone" if alone else "rotating",
        "load_average": os.getloadavg(),
        "machine": machine(),
        "erstwhile_from": loaded,
        "write_s": {k: round(v, 2) for k, v in seconds.items()},
        "records_per_s": {k: round(v, 1) for k, v in rates.items()},
        "rate_vs_this_tree": {k: round(v / rates[ours], 3) for k, v in rates.items()},
        # one batch's upsert: a merge made in the write shows as its slowest ones
        "batch_ms": {k: _spread(v) for k, v in batches.items()},
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another tree's src directory")
    parser.add_argument(
        "--before-label",
        help="what --before holds (default: its git revision), e.g. for an"
        " exported copy of an older commit, which has no revision of its own",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--vectors", choices=("list", "array"), default="list",
        help="each record's vector as a list of floats (the JSON shape, the headline)"
        " or as a NumPy float32 row (erstwhile only; sqlite-vec takes its bytes as ever)",
    )  # fmt: skip
    parser.add_argument(
        "--alone", action="store_true",
        help="each engine's batches back to back, one engine after the other",
    )  # fmt: skip
    parser.add_argument(
        "--tuned", action="store_true",
        help="also this tree in a process that calls erstwhile.tune_process() first"
        " (as the CLI and the server do); the plain engine is what open() embeds",
    )  # fmt: skip
    parser.add_argument(
        "--no-sqlitevec", action="store_true",
        help="leave sqlite-vec + FTS5 out (it needs sqlean, bench/requirements.txt)",
    )  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.size, args.seed, args.path, args.vectors == "array")
        return
    result = run(args.size, args.seed, args.before, args.vectors, args.before_label,
                 alone=args.alone, tuned=args.tuned, peers=not args.no_sqlitevec)  # fmt: skip
    log(json.dumps(result, indent=2))
    name = (f"ingest_{args.size // 1000}k_sqlite{'_tuned' if args.tuned else ''}"
            f"{'_alone' if args.alone else ''}.json")  # fmt: skip
    write_json(args.out or RESULTS / name, result)


if __name__ == "__main__":
    main()

"""Cold CLI: wall and CPU time of one ``erstwhile add`` and one ``erstwhile search``. Each
call is a fresh process (the ``erstwhile`` script beside this interpreter) on a store
that already exists, so the time is what a user waits for one command: interpreter
start, imports, opening the store, loading the embedder, embedding one text, the write
or the search. The default embedder and ``--embedder hash`` (no model at all) alternate
in one sitting, ``rounds`` times each, so the ratio between them holds on a noisy
machine even when the absolute times do not. CPU time (user + system of the child) is
reported beside wall time: on a shared machine the wall time includes waiting for a
core, CPU time does not.

Bytecode. ``pip install erstwhile`` from a wheel compiles every module to ``.pyc`` at
install time; an editable install does not, and with ``PYTHONDONTWRITEBYTECODE`` set
(as on these machines) every call compiled erstwhile's ~80 modules from source again:
0.3-0.6 s of each cold call here. So the package's bytecode is compiled once before
timing (``compileall``, what the wheel install does) and the calls run as a user's
installed package runs.
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import log

EMBEDDERS = ("auto", "hash")
BUDGET_S = 1.5


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def run_coldcli(rounds: int = 5) -> dict[str, Any]:
    import erstwhile

    package = Path(erstwhile.__file__).parent
    compiled = compileall.compile_dir(str(package), quiet=1, force=False)
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-cold-"))
    env = {k: v for k, v in os.environ.items() if k != "ERSTWHILE_EMBEDDER"}
    script = Path(sys.executable).with_name("erstwhile")
    cli = [str(script)] if script.exists() else [
        sys.executable, "-c", "from erstwhile.cli import main; main()"]  # fmt: skip
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        e: {"add": [], "search": []} for e in EMBEDDERS
    }
    try:
        for embedder in EMBEDDERS:  # a store per embedder, made (and warmed) beforehand
            db = str(workdir / f"{embedder}.db")
            subprocess.run([*cli, "--db", db, "--embedder", embedder, "add", "warm up"],
                           env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        for round_ in range(rounds):
            for embedder in EMBEDDERS if round_ % 2 == 0 else EMBEDDERS[::-1]:
                base = [*cli, "--db", str(workdir / f"{embedder}.db"), "--embedder", embedder]
                text = f"I drive a red car to work, round {round_}"
                samples[embedder]["add"].append(_timed([*base, "add", text], env))
                samples[embedder]["search"].append(
                    _timed([*base, "search", "automobile", "--top-k", "3"], env)
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    table: dict[str, Any] = {}
    for embedder, commands in samples.items():
        table[embedder] = {
            command: {
                "wall_s": round(_median([w for w, _ in rows]), 3),
                "cpu_s": round(_median([c for _, c in rows]), 3),
                "wall_all_s": [round(w, 3) for w, _ in rows],
            }
            for command, rows in commands.items()
        }
    ratios = {
        command: {
            "wall": round(table["auto"][command]["wall_s"] / table["hash"][command]["wall_s"], 2),
            "cpu": round(table["auto"][command]["cpu_s"] / table["hash"][command]["cpu_s"], 2),
        }
        for command in ("add", "search")
    }
    from erstwhile.embedding import default_embedder

    result: dict[str, Any] = {
        "rounds": rounds,
        "bytecode_compiled_first": bool(compiled),
        "default_embedder": default_embedder().embedder_id,
        "median": table,
        "ratio_default_to_hash": ratios,
        "budget_s": BUDGET_S,
        "within_budget": all(table["auto"][c]["wall_s"] <= BUDGET_S for c in ("add", "search")),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    log(f"  cold cli: {result['median']['auto']} (default) vs {result['median']['hash']} (hash)")
    return result

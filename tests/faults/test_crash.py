"""kill -9 at random points of batch upserts and of embed jobs, then reopen: every
acknowledged write is there, no batch is partial, no chain forked, ``check`` passes.

Trials are few and short (CI runs them every time); the seed is printed in the
assertion message, and ``ERSTWHILE_FAULT_TRIALS`` runs more by hand.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from tests.faults.embedders import SlowTwin
from tests.faults.figures import FIGURES
from tests.faults.verify import acknowledged, verify

import erstwhile
from erstwhile import backups

WRITER = Path(__file__).with_name("writer.py")
TRIALS = int(os.environ.get("ERSTWHILE_FAULT_TRIALS", "4"))
BATCH = 8


def python_env() -> dict[str, str]:
    """The environment of a worker process: this checkout importable as ``tests``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(WRITER.parents[2]), *sys.path])}


def start_writer(target: str, worker: int, batches: int, acks: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), target, str(worker), str(batches), str(BATCH), str(acks)],
        env=python_env(), stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_for_acks(process: subprocess.Popen[bytes], acks: Path, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(acknowledged(acks)[0]) < count:
        if process.poll() is not None:
            raise AssertionError(f"the writer ended early: {process.stderr.read()!r}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the writer acknowledged nothing"
        time.sleep(0.005)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_kill_during_batch_upserts(store_target: str, tmp_path: Path, trial: int) -> None:
    seed = random.randrange(2**32)
    rnd = random.Random(seed)
    acks = tmp_path / "acks.txt"
    process = start_writer(store_target, 1, 10_000, acks)
    try:
        wait_for_acks(process, acks, rnd.randint(1, 6))
        time.sleep(rnd.uniform(0, 0.05))  # land anywhere inside the next batch
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    FIGURES.add("trials")
    outcome = verify(store_target, [acks], BATCH)
    outcome.record()
    assert outcome.acknowledged > 0
    outcome.assert_clean(f"seed {seed}: ")


# The embed job in a process of its own, slowed so a kill lands mid-job; each batch it
# embeds is one line in the log.
EMBED_WORKER = """
import sys, time
import erstwhile
from tests.faults.embedders import SlowTwin

class Slow(SlowTwin):
    def _embed_batch(self, texts, *, query):
        time.sleep(0.01)
        with open(sys.argv[2], "a") as log:
            log.write(f"{len(texts)}\\n")
        return super()._embed_batch(texts, query=query)

with erstwhile.open(sys.argv[1], embedder=Slow(), background_jobs=False) as m:
    m.embed("faults")
"""


def unbound(lines: Iterable[str]) -> list[str]:
    """An export without its settings lines."""
    return [line for line in lines if not line.startswith('{"namespace":"faults","settings":')]


@pytest.mark.parametrize("trial", range(TRIALS))
def test_kill_during_embed_jobs(store_target: str, tmp_path: Path, trial: int) -> None:
    rnd = random.Random()
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.upsert("faults", [{"id": f"r{i:03d}", "content": f"text {i}"} for i in range(120)])
        before = list(backups.export_lines(m))
    worker = tmp_path / "embed_worker.py"
    worker.write_text(EMBED_WORKER)
    log = tmp_path / "embedded.txt"
    log.touch()
    process = subprocess.Popen(
        [sys.executable, str(worker), store_target, str(log)], env=python_env()
    )
    try:
        stop_after = rnd.randint(1, 20)
        deadline = time.monotonic() + 120
        while len(log.read_text().splitlines()) < stop_after:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(rnd.uniform(0, 0.02))
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    FIGURES.add("trials")
    FIGURES.add("embed jobs killed")
    with erstwhile.open(store_target, embedder=SlowTwin(), background_jobs=False) as m:
        jobs = m.service.jobs("faults")
        assert [job["state"] for job in jobs] in (["interrupted"], ["done"])
        report = m.embed("faults")
        assert report.remaining == 0
        # deriving vectors never changed a record, and nothing is half-stored (the
        # settings lines name each process's own embedder binding, so differ)
        assert unbound(backups.export_lines(m)) == unbound(before)
        checked = backups.check(m)
    problems = [p for f in checked.findings for p in f.problems]
    FIGURES.add("partial", len(problems))
    assert checked.ok, problems

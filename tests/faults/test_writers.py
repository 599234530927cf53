"""N writer processes on one store (a SQLite file, a PostgreSQL schema), racing for one
key: nothing acknowledged is lost, no batch is partial, the chain does not fork. On
SQLite, backups taken while the writers run are consistent stores that
``erstwhile check`` passes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.faults.figures import FIGURES
from tests.faults.test_crash import BATCH, start_writer
from tests.faults.verify import acknowledged, verify
from tests.faults.writer import NAMESPACE
from tests.server.harness import CLI

import erstwhile
from erstwhile import backups

WRITERS = 4
BATCHES = 12


def run_writers(target: str, tmp_path: Path, during: object = None) -> list[Path]:
    acks = [tmp_path / f"acks-{w}.txt" for w in range(WRITERS)]
    processes = [start_writer(target, w, BATCHES, acks[w]) for w in range(WRITERS)]
    try:
        if callable(during):
            during(processes)
        for process in processes:
            assert process.wait(timeout=300) == 0, process.stderr.read()  # type: ignore[union-attr]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return acks


def test_writer_processes_lose_nothing_and_never_fork(store_target: str, tmp_path: Path) -> None:
    with erstwhile.open(store_target, embedder="hash", background_jobs=False):
        pass  # migrations once, before the race
    acks = run_writers(store_target, tmp_path)
    FIGURES.add("trials")
    FIGURES.add("writer processes", WRITERS)
    outcome = verify(store_target, acks, BATCH)
    outcome.record()
    assert outcome.acknowledged >= WRITERS * BATCHES * BATCH
    outcome.assert_clean()
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        chain = m.history(NAMESPACE, m.search(NAMESPACE, "shared", key="shared",
                                              ranking="lexical").ids()[0])  # fmt: skip
    assert len(chain) >= 1 and all(r.key == "shared" for r in chain[-1:])


def test_backup_while_four_writers_run_passes_check(tmp_path: Path) -> None:
    target = str(tmp_path / "live.db")
    with erstwhile.open(target, embedder="hash", background_jobs=False):
        pass
    copies: list[Path] = []

    def acked() -> int:
        return sum(len(acknowledged(tmp_path / f"acks-{w}.txt")[0]) for w in range(WRITERS))

    def take_backups(processes: list[subprocess.Popen[bytes]]) -> None:
        """Up to five backups, spread over the run: one per eight new batches."""
        last = -8
        with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
            while any(p.poll() is None for p in processes) and len(copies) < 5:
                if acked() - last < 8:
                    time.sleep(0.005)  # a poll interval, not a synchronisation
                    continue
                last = acked()
                copy = tmp_path / f"backup-{len(copies)}.db"
                backups.backup(m, copy)
                copies.append(copy)

    acks = run_writers(target, tmp_path, take_backups)
    assert copies
    for copy in copies:
        checked = subprocess.run(
            [*CLI, "--db", str(copy), "--embedder", "hash", "check", "--json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert json.loads(checked.stdout)["ok"] is True
        outcome = verify(str(copy), acks, BATCH, acked_only=True)
        assert not outcome.partial and not outcome.forked, (copy, outcome)
    FIGURES.add("backups under load", len(copies))
    final = verify(target, acks, BATCH)
    final.record()
    final.assert_clean()


def test_verify_notices_a_lost_write_and_a_partial_batch(tmp_path: Path) -> None:
    """The suite's own oracle can fail: remove one acknowledged record behind the
    store's back and it is reported lost, and its batch partial."""
    target = str(tmp_path / "m.db")
    acks = tmp_path / "acks.txt"
    process = start_writer(target, 7, 2, acks)
    assert process.wait(timeout=120) == 0
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        m.delete(NAMESPACE, "w7-1-3", hard=True)
    outcome = verify(target, [acks], BATCH)
    assert outcome.lost == ["w7-1-3"] and outcome.partial == ["7-1"]

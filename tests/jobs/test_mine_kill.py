"""A mine killed with SIGKILL at a random point, then run again, leaves exactly what
one clean run leaves: the same records, versions, links and validity (no duplicate,
nothing missing), the same ledger — on both backends.

The killed run is the real ``erstwhile mine`` in a subprocess; the test watches the
ledger grow and kills it once a randomly chosen number of rows has been written, so
the kill lands between (or inside) batches of a run in progress.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support import raw
from tests.support.folders import Folder
from tests.support.scripts import erstwhile_script

import erstwhile
from erstwhile.domain.time import now_us, to_us

NS = "kill"
SOURCE = "kill-test"
REPEATS = 3


@pytest.fixture
def versions(tmp_path: Path) -> tuple[Path, Path]:
    """The folder before and after many changes (two copies, modification times kept)."""
    folder = Folder(tmp_path / "work", seed=7)
    for _ in range(40):
        folder.add_document(paragraphs=3)
    before = tmp_path / "before"
    shutil.copytree(folder.root, before)
    paths = sorted(folder.docs)
    for path in paths[:12]:
        folder.edit(path, 1)
    for path in paths[12:20]:
        folder.insert(path, 0)
    for path in paths[20:26]:
        folder.delete(path)
    for path in paths[26:30]:
        folder.rename(path, "moved/" + path)
    for _ in range(8):
        folder.add_document(paragraphs=2)
    after = tmp_path / "after"
    shutil.copytree(folder.root, after)
    return before, after


def mine(target: str, folder: Path) -> None:
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        m.mine(NS, folder, source=SOURCE, batch_size=2)


def ledger_rows(target: str) -> int:
    return int(raw.scalar(target, "SELECT count(*) FROM ledger"))


def state(target: str, since: int) -> dict[str, Any]:
    """Everything a mine leaves, with the instants a run takes from its own clock
    (record times, and the end of a vanished document) reduced to "after ``since``"."""

    def instant(value: Any) -> Any:
        return None if value is None else ("run" if to_us(value) >= since else to_us(value))

    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        records = m.service.store.origin_records(NS, SOURCE)
        ledger = m.service.store.ledger(NS)
        jobs = m.service.store.jobs(NS)
    rows = [
        (r.id, r.content, r.origin.model_dump_json() if r.origin else None, r.kind,
         tuple(sorted(r.metadata.items())), instant(r.valid_from), instant(r.valid_to),
         tuple(r.supersedes), r.superseded_by, r.version, r.deleted_at)
        for r in records
    ]  # fmt: skip
    return {
        "records": sorted(rows),
        "ledger": sorted((e.op, e.record_id, e.version) for e in ledger),
        "jobs": [(j["type"], j["state"]) for j in jobs],
    }


def targets(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """Fresh stores on ``backend``, one per call of ``next``."""
    for n in range(REPEATS + 1):
        if backend == "sqlite":
            yield str(tmp_path / f"store-{n}.db")
        else:
            server = request.getfixturevalue("postgres_server")
            target = server.new_target()
            request.addfinalizer(lambda t=target, s=server: s.drop_target(t))
            yield target


def test_a_killed_mine_run_again_leaves_what_a_clean_run_leaves(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, versions: tuple[Path, Path]
) -> None:
    before, after = versions
    since = now_us()
    fresh = targets(backend, tmp_path, request)
    clean = next(fresh)
    mine(clean, before)
    base_rows = ledger_rows(clean)
    mine(clean, after)
    expected = state(clean, since)
    change_rows = ledger_rows(clean) - base_rows
    assert change_rows > 60  # a run long enough to be killed inside

    rng = random.Random()
    killed_inside = 0
    for target in fresh:
        mine(target, before)
        stop_at = base_rows + rng.randint(1, change_rows - 20)
        process = subprocess.Popen(
            [erstwhile_script(), "--db", target, "--embedder", "hash", "mine", str(after),
             "-n", NS, "--source", SOURCE, "--batch-size", "2", "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while ledger_rows(target) < stop_at and process.poll() is None:
                assert time.monotonic() < deadline, "the mine never got going"
                time.sleep(0.002)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.wait(timeout=60)
        written = ledger_rows(target)
        if process.returncode == -signal.SIGKILL and written < base_rows + change_rows:
            killed_inside += 1
        mine(target, after)  # the re-run: opening marks the killed job interrupted
        got = state(target, since)
        assert got["records"] == expected["records"], f"killed after {written - base_rows} rows"
        assert got["ledger"] == expected["ledger"], f"killed after {written - base_rows} rows"
        assert got["jobs"][0] == ("mine", "done") and got["jobs"][-1] == ("mine", "done")
        if process.returncode == -signal.SIGKILL and len(got["jobs"]) == 3:
            assert got["jobs"][1] == ("mine", "interrupted")
    assert killed_inside >= 1, "no kill landed inside a run"

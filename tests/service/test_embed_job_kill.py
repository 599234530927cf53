"""The embed job survives a kill: the database is the cursor, so the next job embeds
only what is left, and the killed job's row says it was interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

import erstwhile
from erstwhile.embedding import Embedder
from erstwhile.jobs.embed import this_process

# A slow, logging embedder in a separate process: each text it embeds is one line.
WORKER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import erstwhile
    from erstwhile.embedding import Embedder

    class Slow(Embedder):
        provider = "test"

        def __init__(self):
            super().__init__(model="slow", dimensions=4, batch_size=2)

        def _embed_batch(self, texts, *, query):
            with open(sys.argv[2], "a") as log:
                log.writelines(t + "\\n" for t in texts)
            time.sleep(0.05)
            return np.ones((len(texts), 4), dtype=np.float32)

    m = erstwhile.open(sys.argv[1], embedder=Slow(), background_jobs=False)
    m.embed("ns")
    """
)


class Logging(Embedder):
    """Same model id as the worker's, so its vectors count as the same embedder."""

    provider = "test"

    def __init__(self, log: Path) -> None:
        super().__init__(model="slow", dimensions=4, batch_size=2)
        self.log = log

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        with self.log.open("a") as out:
            out.writelines(t + "\n" for t in texts)
        return np.ones((len(texts), 4), dtype=np.float32)


def test_a_killed_embed_job_is_marked_interrupted_and_resumed(
    store_target: str, tmp_path: Path
) -> None:
    log = tmp_path / "embedded.txt"
    log.touch()
    records = [{"id": f"r{i:03d}", "content": f"text {i:03d}"} for i in range(200)]
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.upsert("ns", records)  # no embedder yet: all 200 are backlog

    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    process = subprocess.Popen([sys.executable, str(worker), store_target, str(log)])
    deadline = time.monotonic() + 60
    while len(log.read_text().splitlines()) < 20:
        assert process.poll() is None, "the worker ended before it could be killed"
        assert time.monotonic() < deadline, "the worker embedded nothing"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    embedded_before = log.read_text().splitlines()
    assert len(embedded_before) < len(records)

    with erstwhile.open(store_target, embedder=Logging(log), background_jobs=False) as m:
        (killed,) = m.service.jobs("ns")
        assert killed["state"] == "interrupted"
        assert str(process.pid) in killed["owner"] and "interrupted" in killed["error"]
        stored_before = len(records) - m.service.backlog("ns")
        report = m.embed("ns")
        assert report.remaining == 0
        assert [job["state"] for job in m.service.jobs("ns")] == ["interrupted", "done"]
    embedded = log.read_text().splitlines()
    # Everything is embedded; only a batch in flight at the kill may be sent twice.
    assert sorted(set(embedded)) == sorted(r["content"] for r in records)
    assert report.embedded == len(records) - stored_before
    resent = len(embedded) - len(records)
    assert 0 <= resent <= 2, resent


def test_a_running_job_of_a_live_process_is_left_alone(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        job_id = m.service.store.job_start("embed", "ns", 0, this_process())
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        assert m.service.job(job_id)["state"] == "running"

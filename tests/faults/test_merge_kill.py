"""kill -9 while SQLite's lexical tail is being merged, then reopen: every search
answers what a store written in one go with the surviving records answers, the store
passes ``check``, and the next merge takes up what the dead one left.

The writer process lowers the tail's bound through ``ERSTWHILE_TEST_TAIL_ROWS`` (read
by ``store.sqlite.lexical_merge``) to 3,000 records, whose ~40,000 postings a merge
beside the writer copies in two statements, each begun at one of the writer's commits:
its claim in ``lexical_pending`` and the postings copied for it stay unlisted meanwhile.
Even trials watch the file from a connection of the test's and kill the writer the
moment copied postings show; odd ones kill it at a random moment (a merge being made,
copied, listed or made inside a write, or none). Trials go on until one kill has landed
between a copy and its listing (and at least :data:`MIN_TRIALS`), so every run reaches
that state.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import erstwhile
from erstwhile import backups
from erstwhile.store.sqlite import lexical_merge

NAMESPACE = "merges"
MIN_TRIALS = 2
MAX_TRIALS = 12
BOUND = 3_000
#: Terms of the records' contents (letters and digits: no stemming joins two).
WORDS = [f"k{i}x" for i in range(80)]

#: Writes batches of 100 records (each new, 14 words drawn from WORDS), every other
#: batch rewriting five earlier records' content and every third hard-deleting one,
#: printing each batch's number once stored, until killed (or 120 batches, then waits).
WORKER = """
import random, sys, time
import erstwhile
path, seed = sys.argv[1], int(sys.argv[2])
words = sys.argv[3].split()
rnd = random.Random(seed)
def text():
    return " ".join(rnd.choice(words) for _ in range(14))
with erstwhile.open(path, embedder="none", background_jobs=False) as m:
    live = []
    for batch in range(120):
        records = [{"id": f"b{batch}-{j}", "content": text()} for j in range(100)]
        if batch % 2 == 0 and len(live) > 10:
            for old in rnd.sample(live, 5):
                records.append({"id": old, "content": text()})
        m.upsert("merges", records)
        live += [f"b{batch}-{j}" for j in range(100)]
        if batch % 3 == 2:
            m.delete("merges", live.pop(rnd.randrange(len(live))), hard=True)
        print(batch, flush=True)
    time.sleep(600)
"""


def _pending(path: Path, copied: bool = False) -> int:
    """Claims in ``lexical_pending`` as another connection sees them (0 before the
    table exists), or (``copied``) the postings copied for them."""
    sql = f"SELECT count(*) FROM {lexical_merge.PENDING}"
    if copied:
        sql = (f"SELECT count(*) FROM {lexical_merge.MAIN} p JOIN {lexical_merge.PENDING} c"
               " ON c.namespace = p.namespace AND c.seg = p.seg")  # fmt: skip
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _kill_during_merges(path: Path, rnd: random.Random, watch: bool) -> None:
    """Runs the writer and kills it with SIGKILL: once copied postings show (``watch``)
    or at a random moment after its first batches."""
    env = {**os.environ, "ERSTWHILE_TEST_TAIL_ROWS": str(BOUND)}
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path), str(rnd.randrange(2**32)), " ".join(WORDS)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        if not watch:
            for _ in range(rnd.randint(25, 70)):
                if not process.stdout.readline():
                    break
            time.sleep(rnd.uniform(0, 0.1))  # land anywhere in what comes next
            return
        deadline = time.monotonic() + 600
        while not _pending(path, copied=True):
            assert process.poll() is None, f"the writer ended early: {process.stderr.read()!r}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "no merge copied postings"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _answers(memory: erstwhile.Memory, queries: list[str]) -> dict[str, list[tuple[str, float]]]:
    return {
        q: [(h.record.id, h.score)
            for h in memory.search(NAMESPACE, q, ranking="lexical", top_k=20_000).hits]
        for q in queries
    }  # fmt: skip


def _compare(survivor: erstwhile.Memory, fresh_path: Path, rnd: random.Random) -> None:
    """The survivor's every record written into a new store in one batch; both answer
    each query alike (ids, order and scores), and the survivor passes ``check``."""
    with survivor.service.store.reader() as read:
        rows = read("SELECT id, content FROM records WHERE namespace = ?", [NAMESPACE])
    assert rows, "the writer wrote nothing that survived"
    queries = [
        *rnd.sample(WORDS, 12),
        "absent",
        *(" ".join(rnd.sample(WORDS, 3)) for _ in range(6)),
    ]
    with erstwhile.open(str(fresh_path), embedder="none", background_jobs=False) as fresh:
        fresh.upsert(NAMESPACE, [{"id": i, "content": c} for i, c in sorted(rows)])
        assert _answers(survivor, queries) == _answers(fresh, queries)
    report = backups.check(survivor)
    assert report.ok, report.to_json()


def test_kill_during_lexical_merges(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rnd = random.Random(seed)
    copied = trial = 0
    while trial < MIN_TRIALS or (not copied and trial < MAX_TRIALS):
        path = tmp_path / f"t{trial}.db"
        _kill_during_merges(path, rnd, watch=trial % 2 == 0)
        copied += _pending(path, copied=True) > 0
        with erstwhile.open(str(path), embedder="none", background_jobs=False) as m:
            _compare(m, tmp_path / f"fresh{trial}a.db", rnd)
            # the next merge (here one inside a write) removes the dead one's claim and
            # the postings it copied; the answers stay those of the fresh store
            store = m.service.store
            store.db.write(partial(lexical_merge.merge_tail, store.dialect))  # type: ignore[attr-defined]
            assert _pending(path) == 0
            _compare(m, tmp_path / f"fresh{trial}b.db", rnd)
        trial += 1
    assert copied, f"seed {seed}: no kill landed between a merge's copy and its listing"

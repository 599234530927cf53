"""Where an ingest's SQLite time goes, statement by statement:
``python -m bench.ingest_statements --size 100000``.

Ingests the speed data (bench.synth, batches of 1000) into a fresh SQLite store as
``bench.ingest`` does, with every statement a write transaction sends timed: the rows
held back and sent together (``connection.Deferred.send``, by statement), the other
statements (``Transaction.execute`` / ``executemany``), each transaction's begin
and commit (``connection._with_lock_retry``, which runs both), and the making of a
lexical merge's postings (``lexical_merge._prepare``: in a read transaction of the merger's,
or in the write that merges). Statements of the
threads beside the writer (the lexical merger, the checkpointer) are named by their
thread and counted apart (``beside_the_writers_s``). What is left of the upserts'
time is the writer's Python and its waits for a merge beside it (which holds the
write lock). Timing each call costs a little, so the total is a few percent above an
untimed run's.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import log, machine, sized_study
from bench.engines.erstwhile_engine import ErstwhileEngine
from bench.synth import generate
from erstwhile.store.sqlite import connection, lexical_merge

BATCH = 1000


def _key(kind: str, sql: str = "") -> str:
    """``kind`` and the statement's first words, a thread's other than the writer's
    (the merger's, the checkpointer's) named first."""
    thread = threading.current_thread()
    where = "" if thread is threading.main_thread() else f"[{thread.name}] "
    return where + kind + re.sub(r"\s+", " ", sql)[:72]


def timed(size: int, seed: int) -> dict[str, Any]:
    seconds: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    send, execute, executemany = (
        connection.Deferred.send,
        connection.Transaction.execute,
        connection.Transaction.executemany,
    )
    retried = connection._with_lock_retry
    prepare = lexical_merge._prepare

    def note(key: str, start: float, count: int = 1) -> None:
        seconds[key] += time.perf_counter() - start
        calls[key] += count

    def timed_retried(fn: object) -> None:
        start = time.perf_counter()
        retried(fn)
        note(_key("begin and commit"), start)

    def timed_send(self: connection.Deferred, conn: Any) -> None:
        start = time.perf_counter()
        send(self, conn)
        note(_key("held ", self.sql), start, len(self.rows))

    def timed_prepare(tx: Any, last: int) -> None:
        start = time.perf_counter()
        prepare(tx, last)
        note(_key("merge's postings made in SQL (lexical_merge._prepare)"), start)

    def timing(run: Callable[..., Any], kind: str) -> Callable[..., Any]:
        """``Transaction.execute`` or ``executemany`` (``run``), timed after it has
        sent the held rows (which :func:`timed_send` times)."""

        def timed_run(self: connection.Transaction, sql: str, arg: Any = ()) -> Any:
            if self.pending:
                self.flush()
            start = time.perf_counter()
            cursor = run(self, sql, arg)
            note(_key(kind, sql), start)
            return cursor

        return timed_run

    data = generate(size, 10, seed)
    connection.Deferred.send = timed_send  # type: ignore[method-assign]
    connection.Transaction.execute = timing(execute, "execute ")  # type: ignore[method-assign]
    connection.Transaction.executemany = timing(executemany, "executemany ")  # type: ignore[method-assign]
    connection._with_lock_retry = timed_retried
    lexical_merge._prepare = timed_prepare
    try:
        with tempfile.TemporaryDirectory(prefix="erstwhile-bench-statements-") as workdir:
            engine = ErstwhileEngine(str(Path(workdir) / "m.db"), "erstwhile", {})
            engine.open()
            total = 0.0
            for start in range(0, size, BATCH):
                total += engine.ingest_batch(data, start, min(start + BATCH, size))
                if (start // BATCH + 1) % 20 == 0:
                    log(f"  {start + BATCH:,} records")
            engine.close()
    finally:
        connection.Deferred.send = send  # type: ignore[method-assign]
        connection.Transaction.execute = execute  # type: ignore[method-assign]
        connection.Transaction.executemany = executemany  # type: ignore[method-assign]
        connection._with_lock_retry = retried
        lexical_merge._prepare = prepare
    beside = sum(v for key, v in seconds.items() if key.startswith("["))
    statements = sum(seconds.values()) - beside
    return {
        "size": size,
        "seed": seed,
        "batch": BATCH,
        "machine": machine(),
        "upsert_s": round(total, 2),
        "records_per_s": round(size / total, 1),
        "statements_s": round(statements, 2),
        # the writer's time neither in its statements nor its begin and commit: its
        # Python, and its waits for a merge beside the writers (which holds the lock)
        "python_s": round(total - statements, 2),
        "beside_the_writers_s": round(beside, 2),
        "by_statement": [
            {"statement": key, "seconds": round(value, 3), "rows_or_calls": calls[key]}
            for key, value in seconds.most_common()
        ],
    }


def main() -> None:
    sized_study(__doc__, timed, "ingest_statements")


if __name__ == "__main__":
    main()

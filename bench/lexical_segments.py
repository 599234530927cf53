"""What postings as per-term segments would save SQLite's lexical merge (issue 22's
ingest point): ``python -m bench.lexical_segments --size 100000``.

A study, not the store's code. Ingests ``size`` records of the speed data (bench.synth,
batches of 1000) with merges held back for the last tail's worth (merge_due's bound), so
the tail holds what a merge at that size takes. A table of segments is made beside the
postings: one row per (namespace, merge, term) holding the packed array (record int64,
tf int32, length int32) of that merge's postings of the term, the file's postings split
into merges by record. Then, each in a write transaction rolled back (the order
alternating): today's ``merge_tail`` of the tail, and the same documents written as
segments of a new merge plus their ``lexical_terms`` counts; CPU seconds each. On a copy
of the file each is committed once, and the WAL pages it wrote counted. Lastly the
postings of a common, a middling and a rare term are read and scored both ways (today's
SQL expression read as one text value, as ``lexical._ranked_in_copy`` reads them; the
segments' arrays scored as ``lexical._tail_scores`` scores the tail): the same scores,
and each one's median time. What a store would still need (removals, known_at, the
integrity checks, a migration) is not here.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine, sized_study
from bench.engines.erstwhile_engine import ErstwhileEngine
from bench.synth import generate
from erstwhile.store.sql import lexical
from erstwhile.store.sqlite import lexical_merge
from erstwhile.store.sqlite.connection import connect

BATCH = 1000
ROUNDS = 7
#: One posting of a segment.
POSTING = np.dtype([("record", "<i8"), ("tf", "<i4"), ("length", "<i4")])
SEGMENTS = (
    "CREATE TABLE study_segments (namespace TEXT NOT NULL, merge INTEGER NOT NULL,"
    " term TEXT NOT NULL, postings BLOB NOT NULL, PRIMARY KEY (namespace, merge, term))"
    " WITHOUT ROWID"
)
#: The tail's documents by record: (record, namespace, counts, length).
Documents = dict[int, tuple[int, str, Counter[str], int]]


def segments_of(documents: Documents, merge: int) -> list[tuple[str, int, str, bytes]]:
    """The documents' postings as segment rows of ``merge``, in the key's order."""
    codes: dict[tuple[str, str], int] = {}
    terms: list[int] = []
    records: list[int] = []
    tfs: list[int] = []
    lengths: list[int] = []
    for record, namespace, counts, length in sorted(documents.values()):
        for term, tf in counts.items():
            terms.append(codes.setdefault((namespace, term), len(codes)))
            records.append(record)
            tfs.append(tf)
            lengths.append(length)
    code = np.array(terms, np.int64)
    packed = np.empty(code.shape[0], POSTING)
    packed["record"], packed["tf"], packed["length"] = records, tfs, lengths
    order = np.argsort(code, kind="stable")  # each term's postings stay in record order
    code, packed = code[order], packed[order]
    starts = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))
    ends = np.append(starts[1:], code.shape[0])
    keys = list(codes)
    return sorted((keys[code[s]][0], merge, keys[code[s]][1], packed[s:e].tobytes())
                  for s, e in zip(starts.tolist(), ends.tolist(), strict=True))  # fmt: skip


def merge_segments(conn: sqlite3.Connection, documents: Documents) -> None:
    """What a merge into segments writes: one row per term, the df counts, the tail gone."""
    rows = segments_of(documents, merge=10**9)
    conn.executemany("INSERT INTO study_segments VALUES (?, ?, ?, ?)", rows)
    conn.executemany(
        "INSERT INTO lexical_terms (namespace, term, df) VALUES (?, ?, ?)"
        " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df",
        [(ns, term, len(blob) // POSTING.itemsize) for ns, _, term, blob in rows],
    )
    conn.execute("DELETE FROM lexical_tail")


class _NoTail:
    """The dialect merge_tail needs: no process copy of the tail, SQLite's IN lists."""

    lexical_tail = None

    def in_list(self, column: str, values: Any) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)


#: What merge_tail takes for a dialect here (it reads only the two names above).
NO_TAIL: Any = _NoTail()


def tail_documents(conn: sqlite3.Connection) -> Documents:
    rows = conn.execute(
        "SELECT x.record, x.namespace, x.terms, x.length FROM lexical_tail t"
        " JOIN lexical_docs x ON x.record = t.record GROUP BY x.record"
    )
    return {int(r): (int(r), str(ns), Counter(str(t).split()), int(n)) for r, ns, t, n in rows}


def build_segments(conn: sqlite3.Connection, merges: int) -> int:
    """The file's postings as segments, split into ``merges`` merges by record."""
    conn.execute(SEGMENTS)
    (top,) = conn.execute("SELECT coalesce(max(record), 0) + 1 FROM lexical_postings").fetchone()
    by: dict[tuple[str, int, str], list[tuple[int, int, int]]] = {}
    for ns, term, record, tf, length in conn.execute(
        "SELECT namespace, term, record, tf, length FROM lexical_postings"
    ):
        by.setdefault((ns, record * merges // top, term), []).append((record, tf, length))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO study_segments VALUES (?, ?, ?, ?)",
                     sorted((ns, m, t, np.array(v, POSTING).tobytes())
                            for (ns, m, t), v in by.items()))  # fmt: skip
    conn.execute("COMMIT")
    return len(by)


def cpu_ms(conn: sqlite3.Connection, work: Callable[[], None]) -> float:
    conn.execute("BEGIN IMMEDIATE")
    start = time.process_time()
    work()
    spent = time.process_time() - start
    conn.execute("ROLLBACK")
    return spent * 1000


def wal_pages(
    path: Path, copy: Path, merge: Callable[[sqlite3.Connection], None]
) -> dict[str, Any]:
    """Commits ``merge`` once on a copy of the file: its WAL pages and the commit's wall."""
    shutil.copy(path, copy)
    conn = connect(str(copy))
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("BEGIN IMMEDIATE")
    merge(conn)
    start = time.perf_counter()
    conn.execute("COMMIT")
    committed = time.perf_counter() - start
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    pages = Path(f"{copy}-wal").stat().st_size // (page + 24)
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return {"wal_pages": pages, "commit_ms": round(committed * 1000, 1)}


def read_both(conn: sqlite3.Connection, namespace: str, term: str, df: int) -> dict[str, Any]:
    """One term's postings read and scored today's way and from segments."""
    (documents, length) = conn.execute(
        "SELECT documents, length FROM lexical_stats WHERE namespace = ?", (namespace,)
    ).fetchone()
    w = lexical.weights(int(documents), int(length), {term: df}, [term])
    weight = w.terms[0][1]
    merges = [m for (m,) in conn.execute("SELECT DISTINCT merge FROM study_segments")]
    marks = ", ".join("?" for _ in merges)
    times: dict[str, list[float]] = {"sql": [], "segments": []}
    for _ in range(ROUNDS):
        start = time.perf_counter()
        (listed,) = conn.execute(
            "SELECT group_concat(x) FROM (SELECT p.record || ',' ||"
            " CAST(? * p.tf / (p.tf + ? + ? * p.length) AS INTEGER) AS x"
            " FROM lexical_postings p WHERE p.namespace = ? AND p.term = ?)",
            (weight, w.base, w.per_length, namespace, term),
        ).fetchone()
        today = np.fromstring(listed or "", dtype=np.int64, sep=",").reshape(-1, 2)
        times["sql"].append(time.perf_counter() - start)
        start = time.perf_counter()
        blobs = conn.execute(
            f"SELECT postings FROM study_segments WHERE namespace = ? AND merge IN ({marks})"
            " AND term = ?",
            [namespace, *merges, term],
        ).fetchall()
        found = np.concatenate([np.frombuffer(b, POSTING) for (b,) in blobs])
        tf, size = found["tf"].astype(np.float64), found["length"].astype(np.float64)
        parts = (weight * tf / (tf + w.base + w.per_length * size)).astype(np.int64)
        times["segments"].append(time.perf_counter() - start)
    same = sorted(map(tuple, today.tolist())) == sorted(
        zip(found["record"].tolist(), parts.tolist(), strict=True)
    )
    medians = {f"{k}_ms": round(statistics.median(v) * 1000, 3) for k, v in times.items()}
    return {"term": term, "df": df, "same_scores": same, **medians}


def run(size: int, seed: int) -> dict[str, Any]:
    data = generate(size, 10, seed)
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-segments-"))
    try:
        path = workdir / "store.db"
        engine = ErstwhileEngine(str(path), "segments", {})
        engine.open()
        rows, most = lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX
        bound = min(most, max(rows, math.isqrt(rows * size // 4)))
        held = bound // BATCH
        for start in range(0, size, BATCH):
            if start == size - held * BATCH:  # from a merge on, the held batches only
                assert engine.memory is not None
                store: Any = engine.memory.service.store  # a SQLite store: it has one
                dialect = store.dialect
                dialect.db.write(partial(lexical_merge.merge_tail, dialect))
                lexical_merge.TAIL_ROWS = lexical_merge.TAIL_MAX = 10**12
            engine.ingest_batch(data, start, min(start + BATCH, size))
        lexical_merge.TAIL_ROWS, lexical_merge.TAIL_MAX = rows, most
        engine.close()
        conn = connect(str(path))
        merges = max(1, round((size - held * BATCH) / bound))
        segments = build_segments(conn, merges)
        documents = tail_documents(conn)
        postings = sum(len(counts) for _, _, counts, _ in documents.values())
        ms: dict[str, list[float]] = {"merge_tail": [], "segments": []}
        for n in range(ROUNDS):
            order = ["merge_tail", "segments"] if n % 2 else ["segments", "merge_tail"]
            for name in order:
                work: Callable[[], None] = (
                    partial(lexical_merge.merge_tail, NO_TAIL, conn)
                    if name == "merge_tail"
                    else partial(merge_segments, conn, documents)
                )
                ms[name].append(cpu_ms(conn, work))
        namespace = documents[next(iter(documents))][1]
        dfs = dict(conn.execute("SELECT term, df FROM lexical_terms WHERE namespace = ?",
                                (namespace,)).fetchall())  # fmt: skip
        by_df = sorted(dfs, key=lambda t: (dfs[t], t))
        picked = [by_df[-1], by_df[len(by_df) * 9 // 10], by_df[len(by_df) // 2]]
        reads = [read_both(conn, namespace, t, int(dfs[t])) for t in picked]
        conn.close()
        copy = workdir / "copy.db"
        committed = {
            "merge_tail": wal_pages(path, copy, partial(lexical_merge.merge_tail, NO_TAIL)),
            "segments": wal_pages(path, copy, lambda c: merge_segments(c, documents)),
        }  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "size": size,
        "seed": seed,
        "tail_documents": len(documents),
        "tail_postings": postings,
        "merged_segments": segments,
        "merged_as_merges": merges,
        "merge_cpu_ms_median": {k: round(statistics.median(v), 1) for k, v in ms.items()},
        "merge_cpu_ms_all": {k: [round(x, 1) for x in v] for k, v in ms.items()},
        "commit_once": committed,
        "read_one_term": reads,
        "machine": machine(),
    }


def main() -> None:
    sized_study(__doc__, run, "lexical_segments")


if __name__ == "__main__":
    main()

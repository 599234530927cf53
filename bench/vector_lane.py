"""Benchmark of erstwhile's semantic lane on SQLite (exact cosine over in-scope rows).

    python -m bench.vector_lane [--size 100000] [--queries 200]
        [--out bench/results/vector_lane.json]

Generates N clustered 384-d unit vectors with short texts, a ``room`` metadata value
(10 rooms) and ~20 % closed validities; loads them through ``erstwhile.open(...).upsert``;
then times ``m.search(query_vector=...)`` filtered (room AND currently valid, ≈ 8 %),
unfiltered (currently valid, ≈ 80 %) and ``include_historical`` (100 %). Recall@10 is
against a float64 brute force over exactly the in-scope rows; the floor is a plain
numpy gather + matvec over the same rows with a precomputed mask (no SQL). The
filtered (and other) latencies are broken down step by step by re-running what
``SqliteStore.semantic`` does, with a timer around each step.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import os
import platform
import pstats
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import now_us
from erstwhile.domain.validation import parse_model
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sql.rows import COLUMNS, record_from_row
from erstwhile.store.sql.scope import scope_clause, scope_rowids
from erstwhile.store.sql.scoring import top_k

NAMESPACE = "bench"
DIMENSIONS = 384
ROOMS = 10
TOP_K = 10
DAY_US = 86_400 * 1_000_000


# -- data ---------------------------------------------------------------------------


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def vocabulary(rng: np.random.Generator, size: int = 600) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters, rng.integers(3, 9))))
    return sorted(words)


class Data:
    """Everything generated, with a fixed seed, in numpy arrays."""

    def __init__(self, size: int, queries: int, seed: int, centres: int, now: int) -> None:
        rng = np.random.default_rng(seed)
        self.size = size
        self.now = now
        self.centres = unit(rng.standard_normal((centres, DIMENSIONS), dtype=np.float32))
        self.cluster = rng.integers(0, centres, size)
        # per-dimension noise 0.05 → noise norm ≈ 1: cosine to the own centre ≈ 0.7
        noise = rng.standard_normal((size, DIMENSIONS), dtype=np.float32) * 0.05
        self.X = unit(self.centres[self.cluster] + noise)
        self.room = rng.integers(0, ROOMS, size)
        # valid_from between 800 and 30 days ago; 20 % closed 1 to 29 days ago.
        self.valid_from = now - rng.integers(30 * DAY_US, 800 * DAY_US, size)
        self.closed = rng.random(size) < 0.20
        self.valid_to = np.where(self.closed, now - rng.integers(DAY_US, 29 * DAY_US, size), -1)
        words = vocabulary(rng)
        lengths = rng.integers(6, 14, size)
        picks = rng.integers(0, len(words), int(lengths.sum()))
        self.texts: list[str] = []
        at = 0
        for n in lengths:
            self.texts.append(" ".join(words[k] for k in picks[at : at + n]))
            at += n
        # queries: perturbed cluster centres, each with a room for the filtered case
        qc = rng.integers(0, centres, queries)
        self.Q = unit(
            self.centres[qc] + rng.standard_normal((queries, DIMENSIONS), dtype=np.float32) * 0.03
        )
        self.q_room = rng.integers(0, ROOMS, queries)
        # the scope, computed from the generated data (erstwhile's rule at a point `now`:
        # valid_from < now + 1 and (valid_to is None or valid_to > now))
        self.current = (self.valid_from <= now) & (~self.closed | (self.valid_to > now))
        self.room_rows = [np.flatnonzero(self.current & (self.room == r)) for r in range(ROOMS)]
        self.current_rows = np.flatnonzero(self.current)

    @staticmethod
    def record_id(i: int) -> str:
        return f"r{i:07d}"

    def records(self, start: int, stop: int) -> list[dict[str, Any]]:
        out = []
        for i in range(start, stop):
            rec: dict[str, Any] = {
                "id": self.record_id(i),
                "content": self.texts[i],
                "metadata": {"room": f"room-{self.room[i]}"},
                "valid_from": rfc3339(int(self.valid_from[i])),
                "vector": self.X[i].tolist(),
            }
            if self.closed[i]:
                rec["valid_to"] = rfc3339(int(self.valid_to[i]))
            out.append(rec)
        return out


def rfc3339(us: int) -> str:
    t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- measuring ----------------------------------------------------------------------


def ms(seconds: list[float] | np.ndarray) -> dict[str, float]:
    a = np.asarray(seconds) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 3),
        "p95_ms": round(float(np.percentile(a, 95)), 3),
        "mean_ms": round(float(a.mean()), 3),
    }


def exact_top(X64: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int = TOP_K) -> set[int]:
    scores = X64[rows] @ q.astype(np.float64)
    best = np.argpartition(-scores, k - 1)[:k] if scores.shape[0] > k else np.arange(len(rows))
    return {int(rows[i]) for i in best}


def floor_top(X: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int = TOP_K) -> np.ndarray:
    scores = X[rows] @ q
    best = np.argpartition(scores, -k)[-k:]
    return rows[best[np.argsort(-scores[best])]]


def contiguous_top(Xpart: np.ndarray, q: np.ndarray, k: int = TOP_K) -> np.ndarray:
    scores = Xpart @ q
    best = np.argpartition(scores, -k)[-k:]
    return best[np.argsort(-scores[best])]


def ingest(m: erstwhile.Memory, data: Data, batch: int) -> dict[str, Any]:
    """Upserts in batches; times only m.upsert (the dicts are built outside the timer).
    One batch in the middle is also run under cProfile, outside the timed total, to say
    where ingest time goes."""
    total = 0.0
    batches = []
    profile_at = (data.size // batch) // 2 * batch if data.size > batch else None
    profiled: dict[str, Any] | None = None
    for start in range(0, data.size, batch):
        stop = min(start + batch, data.size)
        records = data.records(start, stop)
        if start == profile_at:
            profiled = profile_upsert(m, records)
            continue
        t = time.perf_counter()
        m.upsert(NAMESPACE, records)
        dt = time.perf_counter() - t
        total += dt
        batches.append((stop - start) / dt)
    timed_rows = data.size - (0 if profile_at is None else min(batch, data.size - profile_at))
    return {
        "batch_size": batch,
        "seconds": round(total, 2),
        "rows_per_s": round(timed_rows / total, 1),
        "rows_per_s_first_batch": round(batches[0], 1),
        "rows_per_s_last_batch": round(batches[-1], 1),
        "profile_one_batch": profiled,
    }


PROFILE_FUNCS = {
    # label: (file suffix, function name) — cumulative time inside one m.upsert
    "parse dicts -> Record (pydantic, incl. 384-float vector)": ("memory.py", "to_record"),
    "service.upsert (all after parsing)": ("service.py", "upsert"),
    "store.upsert (transaction, SQL writes)": ("store.py", "upsert"),
    "writes.lookup (SELECT existing by id)": ("writes.py", "lookup"),
    "writes.save (records, meta, fts, versions)": ("writes.py", "save"),
    "rows.snapshot_body (version JSON)": ("rows.py", "snapshot_body"),
    "writes.store_vector": ("writes.py", "store_vector"),
    "writes.ledger": ("writes.py", "ledger"),
    "Record.model_copy (upsert_one)": ("main.py", "model_copy"),
}


def profile_upsert(m: erstwhile.Memory, records: list[dict[str, Any]]) -> dict[str, Any]:
    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.enable()
    m.upsert(NAMESPACE, records)
    profiler.disable()
    wall = time.perf_counter() - t
    stats = pstats.Stats(profiler)
    total = sum(
        v[3]
        for k, v in stats.stats.items()  # type: ignore[attr-defined]
        if k[2] == "upsert" and k[0].endswith("memory.py")
    )
    out: dict[str, Any] = {"rows": len(records), "wall_s_under_profiler": round(wall, 3)}
    shares = {}
    for label, (suffix, name) in PROFILE_FUNCS.items():
        cum = sum(
            v[3]
            for k, v in stats.stats.items()  # type: ignore[attr-defined]
            if k[2] == name and k[0].endswith(suffix)
        )
        shares[label] = round(cum / total, 3) if total else None
    out["share_of_upsert"] = shares
    # sqlite3 C calls (execute/executemany) as one bucket
    sql = sum(
        v[3]
        for k, v in stats.stats.items()  # type: ignore[attr-defined]
        if k[0] == "~" and ("sqlite3.Connection" in k[2] or "sqlite3.Cursor" in k[2])
    )
    out["share_of_upsert"]["sqlite3 execute/executemany (C)"] = round(sql / total, 3)
    return out


def run_searches(
    m: erstwhile.Memory, data: Data, case: str, n: int, first: int = 0
) -> tuple[list[float], list[list[str]]]:
    times = []
    results = []
    for j in range(first, first + n):
        q = data.Q[j].tolist()
        opts: dict[str, Any] = {"query_vector": q, "top_k": TOP_K}
        if case == "filtered":
            opts["filter"] = {"room": f"room-{data.q_room[j]}"}
        elif case == "historical":
            opts["include_historical"] = True
        c = time.process_time()
        t = time.perf_counter()
        res = m.search(NAMESPACE, **opts)
        times.append(time.perf_counter() - t)
        CPU.append(time.process_time() - c)
        results.append([h.record.id for h in res.hits])
    return times, results


# process CPU time (user + sys, all threads) of the searches last run: on a shared
# machine it is far less sensitive to being descheduled than wall time
CPU: list[float] = []


def scope_rows(data: Data, case: str, j: int) -> np.ndarray:
    if case == "filtered":
        return data.room_rows[int(data.q_room[j])]
    if case == "unfiltered":
        return data.current_rows
    return np.arange(data.size)


def breakdown(m: erstwhile.Memory, data: Data, case: str, n: int) -> dict[str, Any]:
    """Re-runs SqliteDialect.semantic step by step (its own scope call, the same cache),
    timing each step."""
    store = m.service.store
    SQLITE = store.dialect  # the dialect whose SQL is re-run
    conn = store.db.conn()
    cache = store.dialect._vectors  # the store's own VectorCache (private; a bench may peek)
    embedder_id = m.service.embedder_for(NAMESPACE).embedder_id
    names = (
        "parse SearchRequest (pydantic, 384 floats)",
        "scope: SQL to a numpy array of rowids (store.in_scope)",
        "cache refresh (incremental, no new rows)",
        "which in-scope records have a vector (matrix.has)",
        "score (matrix.scores: gather + matvec)",
        "top_k",
        "hydrate 10 records (SQL + record_from_row)",
    )
    steps: dict[str, list[float]] = {name: [] for name in names}
    in_scope = []
    whole: list[float] = []
    api: list[float] = []
    plan: list[str] = []
    for j in range(n):
        q = data.Q[j]
        opts: dict[str, Any] = {"query_vector": q.tolist(), "top_k": TOP_K}
        if case == "filtered":
            opts["filter"] = {"room": f"room-{data.q_room[j]}"}
        elif case == "historical":
            opts["include_historical"] = True
        t0 = time.perf_counter()
        request = parse_model(SearchRequest, opts)
        t1 = time.perf_counter()
        window = request.window(now_us())
        if not plan:
            sql, params = scope_rowids(SQLITE, NAMESPACE, request, window)
            plan = [str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        query = np.asarray(request.query_vector, dtype=np.float32)
        conn.execute("BEGIN")
        try:
            t2 = time.perf_counter()
            scope = store.dialect.in_scope(conn, NAMESPACE, request, window)
            t3 = time.perf_counter()
            matrix = cache.refresh(conn, embedder_id, DIMENSIONS)
            t4 = time.perf_counter()
            rowids = scope[matrix.has(scope)]
            t5 = time.perf_counter()
            sims = matrix.scores(rowids, query)
            t6 = time.perf_counter()
            chosen = top_k(sims, TOP_K)
            t7 = time.perf_counter()
            by_rowid = {int(rowids[i]): float(sims[i]) for i in chosen}
            marks = ", ".join("?" for _ in by_rowid)
            hyd = conn.execute(
                f"SELECT {COLUMNS} FROM records WHERE rowid IN ({marks})", list(by_rowid)
            ).fetchall()
            _ = [record_from_row(r, with_payload=False) for r in hyd]
            t8 = time.perf_counter()
        finally:
            conn.execute("COMMIT")
        in_scope.append(len(rowids))
        t = time.perf_counter()
        store.semantic(NAMESPACE, request, window, embedder_id, query, TOP_K)
        whole.append(time.perf_counter() - t)
        t = time.perf_counter()
        m.search(NAMESPACE, **opts)
        api.append(time.perf_counter() - t)
        durations = (t1 - t0, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7)
        for name, dt in zip(names, durations, strict=True):
            steps[name].append(dt)
    out = {name: ms(v)["p50_ms"] for name, v in steps.items()}
    out["sum_of_p50s_ms"] = round(sum(out.values()), 3)
    return {"steps_p50_ms": out, "store_semantic_call_p50_ms": ms(whole)["p50_ms"],
            "m_search_call_p50_ms": ms(api)["p50_ms"],
            # what m.search adds on top of SqliteStore.semantic (parse, plan, fuse, result),
            # paired query by query
            "service_and_other_overhead_ms": round(
                float(np.median(np.array(api) - np.array(whole))) * 1000, 3),
            "queries": n, "in_scope_rows_mean": round(float(np.mean(in_scope)), 1),
            "scope_query_plan": plan}  # fmt: skip


def sql_variants(m: erstwhile.Memory, data: Data, n_filtered: int, n_wide: int) -> dict[str, Any]:
    """Diagnostics for the scope step: the store's own ``in_scope`` (the statement from
    ``scope_rowids``, one text value turned into numpy) vs. variants that produce the
    same rowids, to show what each part costs. Every time includes the numpy array."""
    store = m.service.store
    SQLITE = store.dialect  # the dialect whose SQL is re-run
    conn = store.db.conn()
    now = now_us()

    def request_for(room: str | None) -> tuple[SearchRequest, Any]:
        opts: dict[str, Any] = {"query_vector": [1.0] * DIMENSIONS}
        if room is not None:
            opts["filter"] = {"room": room}
        request = parse_model(SearchRequest, opts)
        return request, request.window(now)

    def rows_to_numpy(sql: str, params: list[Any]) -> np.ndarray:
        return np.fromiter(itertools.chain.from_iterable(conn.execute(sql, params)), np.int64)

    def store_in_scope(room: str | None) -> np.ndarray:
        return store.dialect.in_scope(conn, NAMESPACE, *request_for(room))

    def one_row_each(room: str | None) -> np.ndarray:
        return rows_to_numpy(*scope_rowids(SQLITE, NAMESPACE, *request_for(room)))

    def records_driven(room: str | None) -> np.ndarray:
        where, params = scope_clause(SQLITE, "r", NAMESPACE, *request_for(room))
        return rows_to_numpy(f"SELECT r.rowid FROM records r WHERE {where}", params)

    def membership_only(room: str | None) -> np.ndarray:
        return rows_to_numpy(
            "SELECT record FROM record_meta WHERE namespace = ? AND key = 'room' AND value = ?",
            [NAMESPACE, room],
        )

    variants: dict[str, Any] = {
        "store.in_scope (scope rows carry validity; group_concat -> numpy)": store_in_scope,
        "same statement, one Python row per record": one_row_each,
        "records-driven scope_clause, one row per record (the lane before)": records_driven,
    }
    result: dict[str, Any] = {}
    for case, n in (("filtered", n_filtered), ("unfiltered", n_wide)):
        out: dict[str, Any] = {}
        reference = None
        chosen = dict(variants)
        if case == "filtered":
            chosen["record_meta rowids only (no temporal check, superset)"] = membership_only
        for label, run in chosen.items():
            times = []
            for j in range(n):
                room = f"room-{data.q_room[j]}" if case == "filtered" else None
                t = time.perf_counter()
                got = run(room)
                times.append(time.perf_counter() - t)
            got = np.sort(got)
            if reference is None:
                reference = got
            per_row_us = float(np.median(times)) * 1e6 / max(1, len(got))
            out[label] = {**ms(times), "rows": int(got.shape[0]),
                          "per_row_us": round(per_row_us, 3),
                          "same_rowids_as_store": bool(np.array_equal(got, reference))}  # fmt: skip
        example = "room-0" if case == "filtered" else None
        sql, params = scope_rowids(SQLITE, NAMESPACE, *request_for(example))
        out["store plan"] = [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        result[case] = out
    return result


def cold_load_variants(m: erstwhile.Memory) -> dict[str, Any]:
    """The full-matrix load a first search does (VectorCache.refresh from seq 0), as the
    store's statement (seq index, then a look-up per row) vs. a plain table scan."""
    conn = m.service.store.db.conn()
    embedder_id = m.service.embedder_for(NAMESPACE).embedder_id
    stmts = {
        "store refresh statement (ORDER BY seq via vectors_seq)": (
            "SELECT record, vector, seq FROM vectors WHERE embedder_id = ? AND seq > ?"
            " AND dimensions = ? ORDER BY seq"
        ),
        "table scan in record order (NOT INDEXED, no ORDER BY)": (
            "SELECT record, vector, seq FROM vectors NOT INDEXED WHERE embedder_id = ?"
            " AND seq > ? AND dimensions = ?"
        ),
    }
    out = {}
    for label, sql in stmts.items():
        times = []
        for _ in range(3):
            t = time.perf_counter()
            rows = conn.execute(sql, (embedder_id, 0, DIMENSIONS)).fetchall()
            times.append(time.perf_counter() - t)
        out[label] = {"median_ms": round(float(np.median(times)) * 1000, 1), "rows": len(rows),
                      "plan": [str(r[-1]) for r in conn.execute(
                          "EXPLAIN QUERY PLAN " + sql, (embedder_id, 0, DIMENSIONS))]}  # fmt: skip
    return out


def table_shape(m: erstwhile.Memory) -> dict[str, Any]:
    """Pages per b-tree (dbstat), to show what the WITHOUT ROWID vectors table looks like."""
    conn = m.service.store.db.conn()
    out: dict[str, Any] = {}
    try:
        for name in ("vectors", "vectors_seq", "records", "record_meta", "records_ns_valid"):
            rows = conn.execute(
                "SELECT pagetype, count(*), sum(ncell),"
                " max(length(path) - length(replace(path, '/', ''))) FROM dbstat WHERE name = ?"
                " GROUP BY pagetype",
                (name,),
            ).fetchall()
            out[name] = {r[0]: {"pages": r[1], "cells": r[2]} for r in rows}
            depth = max((r[3] for r in rows), default=0)
            out[name]["depth"] = depth
    except sqlite3.OperationalError as error:  # dbstat not compiled in
        out["error"] = str(error)
    return out


_FRESH_PROCESS_LOAD = """
import json, sys, time
import erstwhile
from erstwhile.embedding import HashEmbedder
m = erstwhile.open(sys.argv[1], embedder=HashEmbedder(dimensions=int(sys.argv[2])),
                   background_jobs=False)
store = m.service.store
embedder_id = m.service.embedder_for(sys.argv[3]).embedder_id
with store.db.snapshot() as conn:
    t = time.perf_counter()
    store.dialect._vectors.refresh(conn, embedder_id, int(sys.argv[2]))
    print(json.dumps(round((time.perf_counter() - t) * 1000, 1)))
"""


def fresh_process_load(path: str, runs: int = 3) -> list[float]:
    """The matrix load as a new process sees it (a CLI search pays it every time),
    away from this process's gigabyte of generated arrays."""
    return [
        json.loads(subprocess.run(
            [sys.executable, "-c", _FRESH_PROCESS_LOAD, path, str(DIMENSIONS), NAMESPACE],
            capture_output=True, text=True, check=True).stdout)
        for _ in range(runs)
    ]  # fmt: skip


def split_cold(path: str, data: Data) -> dict[str, float]:
    """Where the cold first search goes: a fresh open, the matrix load alone (the
    store's VectorCache.refresh from seq 0), then the first search with the matrix in."""
    t0 = time.perf_counter()
    m = erstwhile.open(path, embedder=HashEmbedder(dimensions=DIMENSIONS), background_jobs=False)
    store = m.service.store
    embedder_id = m.service.embedder_for(NAMESPACE).embedder_id
    with store.db.snapshot() as conn:
        t1 = time.perf_counter()
        store.dialect._vectors.refresh(conn, embedder_id, DIMENSIONS)
        t2 = time.perf_counter()
    m.search(NAMESPACE, query_vector=data.Q[0].tolist(), top_k=TOP_K,
             filter={"room": f"room-{data.q_room[0]}"})  # fmt: skip
    t3 = time.perf_counter()
    m.close()
    return {"open_and_connect": round((t1 - t0) * 1000, 1),
            "matrix_load (refresh from seq 0)": round((t2 - t1) * 1000, 1),
            "first_search_after_load": round((t3 - t2) * 1000, 1)}  # fmt: skip


def src_version() -> dict[str, Any]:
    """The commit the package was at, and whether src/ had local changes (others edit it)."""
    root = Path(erstwhile.__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        return {"commit": head, "src_changes": [d for d in dirty if d]}  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None}


# -- main ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--centres", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--wide-queries",
        type=int,
        default=None,
        help="queries for the unfiltered and historical cases (default: --queries"
        " up to 20k records, else 20: each scans ~80-100 %% of the rows)",
    )
    ap.add_argument("--breakdown-queries", type=int, default=30)
    ap.add_argument("--out", default="bench/results/vector_lane.json")
    ap.add_argument("--db", default=None, help="database file (default: a temp dir, removed)")
    ap.add_argument("--keep-db", action="store_true")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    now = now_us()
    t = time.perf_counter()
    data = Data(args.size, args.queries, args.seed, args.centres, now)
    gen_s = time.perf_counter() - t
    scope_frac = float(np.mean([len(r) for r in data.room_rows])) / args.size
    print(f"generated {args.size} x {DIMENSIONS} in {gen_s:.1f} s; filtered scope ≈ "
          f"{scope_frac:.1%}, current ≈ {data.current.mean():.1%}", flush=True)  # fmt: skip

    tmp = None
    if args.db:
        path = args.db
        if os.path.exists(path):
            raise SystemExit(f"{path} exists; give a fresh path")
    else:
        tmp = tempfile.mkdtemp(prefix="erstwhile-bench-")
        path = os.path.join(tmp, "bench.db")

    result: dict[str, Any] = {}
    try:
        m = erstwhile.open(path, embedder=HashEmbedder(dimensions=DIMENSIONS),
                           background_jobs=False)  # fmt: skip
        ing = ingest(m, data, args.batch)
        m.close()
        print(f"ingest: {ing['rows_per_s']} rows/s ({ing['seconds']} s)", flush=True)
        db_bytes = sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))

        # reopen: the first search of a process loads the whole matrix (cold)
        m = erstwhile.open(path, embedder=HashEmbedder(dimensions=DIMENSIONS),
                           background_jobs=False)  # fmt: skip
        t = time.perf_counter()
        m.search(NAMESPACE, query_vector=data.Q[0].tolist(), top_k=TOP_K,
                 filter={"room": f"room-{data.q_room[0]}"})  # fmt: skip
        cold_ms = (time.perf_counter() - t) * 1000
        print(f"cold first search (loads matrix): {cold_ms:.1f} ms", flush=True)
        cold_split = split_cold(path, data)
        cold_fresh = fresh_process_load(path)
        print(f"matrix load in a fresh process (ms): {cold_fresh}", flush=True)

        X64 = data.X.astype(np.float64)
        cases: dict[str, Any] = {}
        gc.collect()
        wide = args.wide_queries or (args.queries if args.size <= 20_000 else 20)
        wide = min(wide, args.queries)
        for case in ("filtered", "unfiltered", "historical"):
            nq = args.queries if case == "filtered" else wide
            run_searches(m, data, case, min(10 if case == "filtered" else 3, nq))  # warm-up
            parts = (
                {r: np.ascontiguousarray(data.X[data.room_rows[r]]) for r in range(ROOMS)}
                if case == "filtered"
                else {}
            )
            # Interleaved, query by query: erstwhile, then the floors over exactly the
            # same in-scope rows (precomputed, no SQL), so load swings on a shared machine
            # hit both sides of each ratio alike.
            times, f_times, c_times, recalls, f_cpu = [], [], [], [], []
            CPU.clear()
            for j in range(nq):
                t_search, ids = run_searches(m, data, case, 1, first=j)
                times += t_search
                rows = scope_rows(data, case, j)
                c = time.process_time()
                t = time.perf_counter()
                floor_top(data.X, rows, data.Q[j])
                f_times.append(time.perf_counter() - t)
                f_cpu.append(time.process_time() - c)
                if parts:
                    part = parts[int(data.q_room[j])]
                    t = time.perf_counter()
                    contiguous_top(part, data.Q[j])
                    c_times.append(time.perf_counter() - t)
                truth = exact_top(X64, rows, data.Q[j])
                recalls.append(len({int(i[1:]) for i in ids[0]} & truth) / TOP_K)
            entry: dict[str, Any] = {
                "in_scope_rows_mean": round(
                    float(np.mean([len(scope_rows(data, case, j)) for j in range(nq)])), 1
                ),
                "queries": nq,
                "erstwhile": ms(times),
                "erstwhile_cpu_p50_ms": round(float(np.median(CPU)) * 1000, 3),
                "floor_gather_cpu_p50_ms": round(float(np.median(f_cpu)) * 1000, 3),
                "ratio_cpu_p50_vs_floor_cpu": round(float(np.median(CPU) / np.median(f_cpu)), 1),
                "recall_at_10": round(float(np.mean(recalls)), 4),
                "recall_at_10_min": round(float(np.min(recalls)), 2),
                "floor_gather": ms(f_times),
                "ratio_p50_vs_floor": round(float(np.median(times) / np.median(f_times)), 1),
                "ratio_median_per_query": round(
                    float(np.median(np.array(times) / np.array(f_times))), 1
                ),
            }
            if c_times:
                entry["floor_contiguous_partition"] = ms(c_times)
                entry["ratio_p50_vs_contiguous"] = round(
                    float(np.median(times) / np.median(c_times)), 1
                )
            entry["breakdown"] = breakdown(
                m, data, case, min(args.breakdown_queries if case == "filtered" else 6, nq)
            )
            cases[case] = entry
            print(f"{case}: p50 {entry['erstwhile']['p50_ms']} ms, recall "
                  f"{entry['recall_at_10']}, floor {entry['floor_gather']['p50_ms']} ms",
                  flush=True)  # fmt: skip
        shape = table_shape(m)
        cold_variants = cold_load_variants(m)
        variants = sql_variants(m, data, min(args.breakdown_queries, args.queries), min(5, wide))
        m.close()

        result = {
            "benchmark": "vector_lane",
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "python -m bench.vector_lane " + " ".join(argv or sys.argv[1:]),
            "sizes": {
                "records": args.size,
                "dimensions": DIMENSIONS,
                "centres": args.centres,
                "queries": args.queries,
                "top_k": TOP_K,
                "rooms": ROOMS,
                "closed_fraction": round(float(data.closed.mean()), 4),
                "filtered_scope_fraction": round(scope_frac, 4),
                "db_bytes": db_bytes,
            },
            "ingest": ing,
            "cold_first_search_ms": round(cold_ms, 1),
            "cold_split_ms": cold_split,
            "matrix_load_fresh_process_ms": cold_fresh,
            "cases": cases,
            "cold_load_sql": cold_variants,
            "scope_sql_variants": variants,
            "table_shape": shape,
            "src": src_version(),
            "machine": {
                "cpu_count": os.cpu_count(),
                "loadavg_at_start": load_start,
                "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
                "numpy": np.__version__,
                "sqlite": sqlite3.sqlite_version,
                "python": platform.python_version(),
                "platform": platform.platform(),
                "blas_thread_env": {
                    k: os.environ.get(k)
                    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
                },
            },
            "total_seconds": round(time.perf_counter() - started, 1),
        }
    finally:
        if tmp and not args.keep_db:
            shutil.rmtree(tmp, ignore_errors=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"\nwrote {out}")
    return result


def print_table(r: dict[str, Any]) -> None:
    s = r["sizes"]
    mach = r["machine"]
    print(f"\n### erstwhile vector lane — {s['records']:,} x {s['dimensions']}, top-{s['top_k']}, "
          f"{mach['cpu_count']} CPUs, numpy {mach['numpy']}, SQLite {mach['sqlite']}, "
          f"load avg {mach['loadavg_at_start'][0]}→{mach['loadavg_at_end'][0]}\n")  # fmt: skip
    print(f"ingest: {r['ingest']['rows_per_s']:,} rows/s · cold first search (loads the "
          f"matrix): {r['cold_first_search_ms']} ms\n\ncold, again, split (ms): "
          f"{r['cold_split_ms']}\n")  # fmt: skip
    print(
        "| case | queries | in-scope rows | p50 ms | p95 ms | CPU p50 ms | recall@10 "
        "| floor p50 ms | p50 / floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case, e in r["cases"].items():
        print(f"| {case} | {e['queries']} | {e['in_scope_rows_mean']:,.0f} | "
              f"{e['erstwhile']['p50_ms']} | {e['erstwhile']['p95_ms']} | "
              f"{e['erstwhile_cpu_p50_ms']} | {e['recall_at_10']} | "
              f"{e['floor_gather']['p50_ms']} | {e['ratio_p50_vs_floor']}x |")  # fmt: skip
    f = r["cases"].get("filtered")
    if f and "floor_contiguous_partition" in f:
        print(f"\nfiltered, contiguous-partition floor: {f['floor_contiguous_partition']['p50_ms']}"
              f" ms ({f['ratio_p50_vs_contiguous']}x)")  # fmt: skip
    print("\n| step (p50 ms) | " + " | ".join(r["cases"]) + " |")
    print("|---|" + "---:|" * len(r["cases"]))
    steps = list(next(iter(r["cases"].values()))["breakdown"]["steps_p50_ms"])
    rows = [
        *steps,
        "store_semantic_call_p50_ms",
        "m_search_call_p50_ms",
        "service_and_other_overhead_ms",
    ]
    first = next(iter(r["cases"].values()))["breakdown"]
    rows += list(first.get("gather_plus_matvec_alternatives_p50_ms", {}))
    for step in rows:
        vals = []
        for e in r["cases"].values():
            b = e["breakdown"]
            alts = b.get("gather_plus_matvec_alternatives_p50_ms", {})
            vals.append(b["steps_p50_ms"].get(step, b.get(step, alts.get(step))))
        print(f"| {step} | " + " | ".join(str(v) for v in vals) + " |")
    for case, variants in r.get("scope_sql_variants", {}).items():
        print(f"\n| {case} scope SQL variant | p50 ms | rows | µs/row | same rowids |")
        print("|---|---:|---:|---:|---|")
        for label, v in variants.items():
            if not isinstance(v, dict):  # the store statement's query plan
                continue
            print(f"| {label} | {v['p50_ms']} | {v['rows']:,} | {v['per_row_us']} | "
                  f"{v['same_rowids_as_store']} |")  # fmt: skip
    print("\n| cold matrix load SQL | ms |\n|---|---:|")
    for label, v in r.get("cold_load_sql", {}).items():
        print(f"| {label} | {v['median_ms']} |")


if __name__ == "__main__":
    main()

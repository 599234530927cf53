"""SQLite and PostgreSQL side by side: ingest, filtered semantic and hybrid search.

    python -m bench.backends [--size 100000] [--queries 200]
        [--out bench/results/backends.json] [--pg-url URL]

One dataset (fixed seed): N clustered 384-d unit vectors with short texts of random
words, a ``room`` metadata value (10 rooms) and ~20 % of records closed in the past.
It is loaded through the public API into each backend (``m.upsert`` in batches, the
vectors given, so nothing is embedded), then the same queries run against each,
interleaved query by query so load swings on a shared machine hit all of them
(the order rotates from query to query, so no variant always runs right after another):

- ``filtered semantic``: ``query_vector`` with ``filter={"room": X}``, current (≈ 8 %
  of the rows in scope);
- ``filtered hybrid``: a two-word text query, ``ranking="hybrid"``, same scope (the
  query is embedded by the namespace's hash embedder, the same on both backends);
- ``wide semantic``: ``query_vector``, current, no filter (≈ 80 % in scope).

Variants: ``sqlite`` (exact within the scope), ``postgres`` (as shipped: the process's
scope copy, built by the search that needs it first and timed apart, answers from
memory while nothing changed; :mod:`erstwhile.store.postgres.scope_copy`),
``postgres-sql`` (the SQL lane without the copy: exact up to ``EXACT_LIMIT`` in-scope
vectors, HNSW with iterative scans beyond), ``postgres-hnsw`` (SQL forced onto the
index) and ``postgres-exact`` (SQL, every scope ranked exactly: what the switch weighs
the index against). Recall@10 is against exact answers: for
semantic, a float64 brute force over exactly the in-scope rows; for hybrid, RRF of
that brute force and the backend's own lexical lane (exact on both backends; BM25 and
ts_rank_cd rank differently, so each backend is compared with itself).

Without ``--pg-url`` a PostgreSQL is started with scripts/pg-up in a temp dir (and
stopped at the end). Results go to ``--out`` as JSON and to stdout as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

import erstwhile
from erstwhile.domain.fusion import reciprocal_rank_fusion
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import format_instant, now_us
from erstwhile.domain.validation import parse_model
from erstwhile.embedding import HashEmbedder
from erstwhile.store.postgres import vectors as pg_vectors
from erstwhile.store.postgres.connection import with_schema
from erstwhile.store.postgres.dialect import EXACT_LIMIT, SCOPE_ROWS, PostgresDialect
from erstwhile.store.sql.rows import prefixed
from erstwhile.store.sql.scope import scope_clause, scope_rowids
from erstwhile.store.sql.store import SqlStore

ROOT = Path(__file__).resolve().parents[1]
NS = "bench"
DIMENSIONS = 384
ROOMS = 10
TOP_K = 10
DAY = 86_400 * 1_000_000


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


class Data:
    """The dataset and the queries, generated with a fixed seed."""

    def __init__(self, size: int, queries: int, seed: int, now: int) -> None:
        rng = np.random.default_rng(seed)
        self.size, self.now = size, now
        centres = unit(rng.standard_normal((1000, DIMENSIONS), dtype=np.float32))
        noise = rng.standard_normal((size, DIMENSIONS), dtype=np.float32) * 0.05
        self.X = unit(centres[rng.integers(0, 1000, size)] + noise)
        self.room = rng.integers(0, ROOMS, size)
        self.valid_from = now - rng.integers(30, 800, size) * DAY
        closed = rng.random(size) < 0.2
        self.valid_to = np.where(closed, now - rng.integers(1, 29, size) * DAY, 0)
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        words: set[str] = set()
        while len(words) < 2000:
            words.add("".join(rng.choice(letters, rng.integers(3, 9))))
        self.words = sorted(words)
        counts = rng.integers(3, 13, size)
        picks = rng.integers(0, len(self.words), int(counts.sum()))
        offsets = np.concatenate([[0], np.cumsum(counts)])
        self.texts = [
            " ".join(self.words[w] for w in picks[offsets[i] : offsets[i + 1]]) for i in range(size)
        ]
        self.ids = [f"r{i:07d}" for i in range(size)]
        self.current = (self.valid_from < now) & ((self.valid_to == 0) | (self.valid_to > now))
        q_noise = rng.standard_normal((queries, DIMENSIONS), dtype=np.float32) * 0.05
        self.queries = unit(centres[rng.integers(0, 1000, queries)] + q_noise)
        self.query_rooms = rng.integers(0, ROOMS, queries)
        self.query_texts = [
            " ".join(self.words[w] for w in rng.integers(0, len(self.words), 2))
            for _ in range(queries)
        ]

    def batch(self, start: int, stop: int) -> list[dict[str, Any]]:
        out = []
        for i in range(start, stop):
            record: dict[str, Any] = {
                "id": self.ids[i],
                "content": self.texts[i],
                "metadata": {"room": f"room-{self.room[i]}"},
                "valid_from": format_instant(int(self.valid_from[i])),
                "vector": self.X[i].tolist(),
            }
            if self.valid_to[i]:
                record["valid_to"] = format_instant(int(self.valid_to[i]))
            out.append(record)
        return out

    def exact(self, query: np.ndarray, room: int | None, k: int) -> list[str]:
        """Float64 brute force over exactly the in-scope rows; ties by id."""
        mask = self.current if room is None else self.current & (self.room == room)
        rows = np.flatnonzero(mask)
        scores = self.X[rows].astype(np.float64) @ query.astype(np.float64)
        order = np.lexsort((rows, -scores))[:k]
        return [self.ids[rows[i]] for i in order]


# -- PostgreSQL -----------------------------------------------------------------------


class Postgres:
    """A PostgreSQL to load into: the one given, or one started here."""

    def __init__(self, url: str | None) -> None:
        self.home: Path | None = None
        if url is None:
            self.home = Path(tempfile.mkdtemp(prefix="erstwhile-bench-pg-"))
            settings = ["shared_buffers=1GB", "maintenance_work_mem=1GB", "max_wal_size=4GB"]
            url = subprocess.run(
                ["bash", str(ROOT / "scripts" / "pg-up"), str(self.home), *settings],
                check=True, capture_output=True, text=True,
            ).stdout.strip().splitlines()[-1]  # fmt: skip
        # the prefix "pg_" is reserved for PostgreSQL's own schemas
        self.schema = f"pgbench_{uuid.uuid4().hex[:8]}"
        self.base = url
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f'CREATE SCHEMA "{self.schema}"'.encode())
                self.versions = conn.execute(
                    "SELECT current_setting('server_version'),"
                    " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
                ).fetchone()
        except BaseException:
            self.close()
            raise
        self.url = with_schema(url, self.schema)

    def close(self) -> None:
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'.encode())
        if self.home is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "pg-down"), str(self.home)], check=False)
            shutil.rmtree(self.home, ignore_errors=True)


class _Captured:
    """A connection that keeps the statements run through it (to explain them)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[tuple[Any, Any]] = []

    def execute(self, sql: Any, params: Any = None) -> Any:
        self.statements.append((sql, params))
        return self.conn.execute(sql, params)


def round_trips(m: erstwhile.Memory, search: dict[str, Any]) -> dict[str, Any]:
    """What one PostgreSQL search sends (libpq's trace of every pooled connection):
    its statements and the round trips they cost (a Sync or a simple Query each)."""
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    pool = store.dialect.db.pool
    m.search(NS, **search)  # a warm connection
    with tempfile.TemporaryFile("w+") as trace:
        connections = list(pool._pool)  # the idle ones; a search takes one of them
        for conn in connections:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(1)  # no timestamps
        try:
            m.search(NS, **search)
        finally:
            for conn in connections:
                conn.pgconn.untrace()
        trace.seek(0)
        sent = re.findall(r"^F\t\d+\t(\w+)", trace.read(), re.M)
    return {"round_trips": sum(name in ("Sync", "Query") for name in sent),
            "statements": sum(name in ("Execute", "Query") for name in sent),
            "messages": sent}  # fmt: skip


def explain(store: SqlStore, data: Data, room: int) -> dict[str, list[str]]:
    """The plans PostgreSQL chooses for one filtered query: the statement the exact
    lane runs (as shipped, vectors.scope_ranked) and the HNSW statement with the
    scope's clauses (the lane of scopes too large to read whole)."""
    request = parse_model(SearchRequest, {"query_vector": data.queries[0].tolist(),
                                          "filter": {"room": f"room-{room}"}})  # fmt: skip
    window = request.window(now_us())
    where, params = scope_clause(store.dialect, "r", NS, request, window)
    embedder_id = HashEmbedder(dimensions=DIMENSIONS).embedder_id
    plans = {}
    query = data.queries[0]
    scope, scope_params = scope_rowids(store.dialect, NS, request, window)
    with store.db.connection() as conn:
        captured = _Captured(conn)
        pg_vectors.scope_ranked(
            captured, NS, scope, scope_params, embedder_id, query, TOP_K,  # type: ignore[arg-type]
            exact_limit=EXACT_LIMIT, most=SCOPE_ROWS, columns=prefixed("r"),
        )  # fmt: skip
    built = {
        "exact": captured.statements[-1],
        "hnsw": pg_vectors.approximate_query(
            NS, prefixed("r"), where, params, embedder_id, query, TOP_K
        ),
    }
    with store.db.atomic() as conn:
        pg_vectors.iterative_scan(conn, 64)
        for name, statement in built.items():
            assert statement is not None
            sql, values = statement
            text = sql if isinstance(sql, str) else sql.decode()
            explained = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + text.replace("?", "%s")
            rows = conn.execute(explained.encode(), values)
            plans[name] = [re.sub(r"'\[[^']*\]'", "'[…]'", row[0]) for row in rows]
    return plans


# -- the run --------------------------------------------------------------------------


def load(m: erstwhile.Memory, data: Data, batch: int) -> float:
    """Seconds to upsert every record, in batches."""
    started = time.perf_counter()
    for start in range(0, data.size, batch):
        m.upsert(NS, data.batch(start, min(start + batch, data.size)))
    return time.perf_counter() - started


def sql_only(url: str, embedder: HashEmbedder, exact_limit: int | None) -> erstwhile.Memory:
    """A PostgreSQL handle whose vector lane is always SQL (no scope copy), optionally
    with another exact/HNSW switch point."""
    m = erstwhile.open(url, embedder=embedder, background_jobs=False)
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    store.dialect.copies.enabled = False
    if exact_limit is not None:
        store.dialect.exact_limit = exact_limit
    return m


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def build_copy(m: erstwhile.Memory, data: Data) -> dict[str, Any]:
    """The process's scope copy of the namespace, built by the search that needs it
    (the WARM_AFTER-th): how long that search took and what the copy holds."""
    store = m.service.store
    assert isinstance(store, SqlStore) and isinstance(store.dialect, PostgresDialect)
    copies = store.dialect.copies
    search = {"query_vector": data.queries[0].tolist(), "top_k": TOP_K, "ids_only": True}
    before = _rss()
    while NS not in copies._copies:
        started = time.perf_counter()
        m.search(NS, **search)
        seconds = time.perf_counter() - started
    return {
        "build_seconds": round(seconds, 2),
        "mib": round(copies.nbytes() / 2**20),
        "rss_growth_mib": round((_rss() - before) / 2**20),
        "warm_after": copies.warm_after,
    }


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.array(values) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2)}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    now = now_us()
    data = Data(args.size, args.queries, args.seed, now)
    embedder = HashEmbedder(dimensions=DIMENSIONS)
    work = Path(tempfile.mkdtemp(prefix="erstwhile-bench-"))
    pg = Postgres(args.pg_url)
    result: dict[str, Any] = {
        "command": "python -m bench.backends " + " ".join(args.argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_start": os.getloadavg()},
        "postgres": {"server": pg.versions[0] if pg.versions else None,
                     "pgvector": pg.versions[1] if pg.versions else None,
                     "exact_limit": EXACT_LIMIT, "scope_rows": SCOPE_ROWS},
        "size": args.size, "dimensions": DIMENSIONS, "queries": args.queries,
        "in_scope": {"filtered": int((data.current & (data.room == 0)).sum()),
                     "wide": int(data.current.sum())},
        "ingest": {}, "search": {},
    }  # fmt: skip
    try:
        memories = {
            "sqlite": erstwhile.open(work / "bench.db", embedder=embedder, background_jobs=False),
            "postgres": erstwhile.open(pg.url, embedder=embedder, background_jobs=False),
        }
        for name, m in memories.items():
            seconds = load(m, data, args.batch)
            result["ingest"][name] = {"seconds": round(seconds, 1),
                                      "rows_per_s": round(data.size / seconds)}  # fmt: skip
            print(f"{name}: loaded {data.size} rows in {seconds:.1f} s", flush=True)
        pg_store = memories["postgres"].service.store
        assert isinstance(pg_store, SqlStore) and isinstance(pg_store.dialect, PostgresDialect)
        started = time.perf_counter()
        pg_store.build_vector_index(DIMENSIONS)  # else the first search past EXACT_LIMIT does
        result["ingest"]["postgres"]["hnsw_build_seconds"] = round(time.perf_counter() - started, 1)
        result["copy"] = build_copy(memories["postgres"], data)
        print(f"postgres: scope copy built in {result['copy']['build_seconds']} s,"
              f" {result['copy']['mib']} MiB", flush=True)  # fmt: skip
        sql_lane = sql_only(pg.url, embedder, None)  # the SQL lane as shipped, no copy
        forced = sql_only(pg.url, embedder, 0)
        exact = sql_only(pg.url, embedder, args.size)  # every scope ranked exactly
        variants = {**memories, "postgres-sql": sql_lane, "postgres-hnsw": forced,
                    "postgres-exact": exact}  # fmt: skip
        if args.variants:  # a subset measured (the rest would only share the machine)
            variants = {name: variants[name] for name in args.variants.split(",")}
        result["plans"] = explain(pg_store, data, int(data.query_rooms[0]))
        room = f"room-{int(data.query_rooms[0])}"
        vector = data.queries[0].tolist()
        result["round_trips"] = {
            case: round_trips(memories["postgres"], dict(search, top_k=TOP_K, ids_only=True))
            for case, search in (
                ("filtered semantic", {"query_vector": vector, "filter": {"room": room}}),
                ("filtered hybrid", {"query": data.query_texts[0], "ranking": "hybrid",
                                     "filter": {"room": room}}),
                ("wide semantic", {"query_vector": vector}),
            )
        }  # fmt: skip
        result["search"] = measure(variants, data, embedder, args)
        # steady state: more writes into the loaded store, the HNSW index now maintained
        extra = data.batch(0, min(args.extra, data.size))
        for record in extra:
            record["id"] = "x" + record["id"]
        for name, m in memories.items():
            started = time.perf_counter()
            for start in range(0, len(extra), args.batch):
                m.upsert(NS, extra[start : start + args.batch])
            seconds = time.perf_counter() - started
            result["ingest"][name]["loaded_rows_per_s"] = round(len(extra) / seconds)
        for variant in (sql_lane, forced, exact):
            variant.close()
        for m in memories.values():
            m.close()
    finally:
        pg.close()
        shutil.rmtree(work, ignore_errors=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    return result


def measure(
    variants: dict[str, erstwhile.Memory], data: Data, embedder: HashEmbedder,
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    cases: dict[str, Any] = {}
    for case, count in (("filtered semantic", args.queries), ("filtered hybrid", args.queries),
                        ("wide semantic", args.wide_queries)):  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in variants}
        recall: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(-5, count):  # five warm-up queries first
            q = i % data.queries.shape[0]
            room = None if case.startswith("wide") else int(data.query_rooms[q])
            scope: dict[str, Any] = {} if room is None else {"filter": {"room": f"room-{room}"}}
            truth: dict[str, list[str]] = {}
            if case.endswith("semantic"):
                expected = data.exact(data.queries[q], room, TOP_K)
            # each variant takes each place in the order in turn: the one that runs
            # right after SQLite's search was measured here to pay for it (8-25 ms on
            # the filtered case under load), whichever it is
            names = list(variants)
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                m = variants[name]
                started = time.perf_counter()
                if case.endswith("semantic"):
                    got = m.search(NS, query_vector=data.queries[q].tolist(), top_k=TOP_K,
                                   ids_only=True, **scope).ids()  # fmt: skip
                else:
                    got = m.search(NS, data.query_texts[q], ranking="hybrid", top_k=TOP_K,
                                   ids_only=True, **scope).ids()  # fmt: skip
                elapsed = time.perf_counter() - started
                if case.endswith("hybrid"):
                    lexical = m.search(NS, data.query_texts[q], ranking="lexical", top_k=50,
                                       ids_only=True, **scope).ids()  # fmt: skip
                    semantic = data.exact(embedder.embed_query(data.query_texts[q]), room, 50)
                    fused = reciprocal_rank_fusion([lexical, semantic])
                    truth[name] = [rid for rid, _ in fused[:TOP_K]]
                    expected = truth[name]
                if i >= 0:
                    times[name].append(elapsed)
                    hits = len(set(got) & set(expected))
                    recall[name].append(hits / max(1, min(TOP_K, len(expected))))
        cases[case] = {
            name: {**percentiles(times[name]),
                   "recall_at_10": round(float(np.mean(recall[name])), 4)}
            for name in variants
        }  # fmt: skip
        print(case, json.dumps(cases[case]), flush=True)
    return cases


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['size']} records x {result['dimensions']} d; filtered scope "
        f"{result['in_scope']['filtered']} rows, wide {result['in_scope']['wide']}",
        f"ingest: {json.dumps(result['ingest'])}",
        "",
        "| backend | ingest rows/s | case | p50 ms | p95 ms | recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    for case, by_backend in result["search"].items():
        for name, figures in by_backend.items():
            ingest = result["ingest"].get(name.split("-")[0], {}).get("rows_per_s", "")
            lines.append(f"| {name} | {ingest} | {case} | {figures['p50_ms']} | "
                         f"{figures['p95_ms']} | {figures['recall_at_10']} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--wide-queries", type=int, default=20)
    parser.add_argument("--extra", type=int, default=2000, help="rows written after the load")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--variants", default="",
                        help="comma-separated subset to measure, e.g. sqlite,postgres")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/backends.json")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()

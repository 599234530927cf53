"""Speed: every engine on the same generated data, in one process, query by query.

For each case the engines answer the same queries in turn — query j goes to every
engine before query j + 1, the order rotating — so a load swing on this shared machine
hits them alike, and each latency is a ratio to erstwhile's in the same run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import latency, log
from bench.engines import CASE_TITLES, CASES, Engine, Query, case_queries
from bench.synth import SpeedData, generate
from bench.truth import Bm25, hybrid_top, lexical_top, semantic_top

TOP_K = 10
WARMUP = 5
ERSTWHILE = "erstwhile (SQLite)"
ERSTWHILE_PG = "erstwhile (PostgreSQL)"
PEERS = ("chroma", "lance", "sqlitevec")
REPO = Path(__file__).resolve().parents[1]


def scope_of(data: SpeedData, query: Query) -> np.ndarray:
    mask = np.ones(data.size, dtype=bool)
    if query.at_us is not None:
        mask &= data.valid_at(query.at_us)
    if query.room is not None:
        mask &= data.rooms == int(query.room.removeprefix("room-"))
    return np.flatnonzero(mask)


class Truth:
    """Exact answers per (case, query), and how to score an engine's answer."""

    def __init__(self, data: SpeedData, queries: dict[str, list[Query]]) -> None:
        self.bm25 = Bm25(data)
        x64 = data.vectors.astype(np.float64)
        self.scopes: dict[tuple[str, int], np.ndarray] = {}
        self.best: dict[tuple[str, int], set[int]] = {}
        self.lexical: dict[int, tuple[np.ndarray, float, int]] = {}
        terms = data.queries.terms
        for case, items in queries.items():
            for query in items:
                rows = scope_of(data, query)
                key = (case, query.index)
                self.scopes[key] = rows
                if case == "lexical":
                    best, threshold = lexical_top(self.bm25, terms[query.index], rows, TOP_K)
                    scores = np.zeros(data.size)
                    scores[rows] = self.bm25.scores(terms[query.index], rows)
                    self.lexical[query.index] = (scores, threshold, best.shape[0])
                    self.best[key] = set(best.tolist())
                elif case == "hybrid_filtered":
                    best = hybrid_top(data, x64, self.bm25, rows, query.vector,
                                      terms[query.index], TOP_K)  # fmt: skip
                    self.best[key] = set(best.tolist())
                else:
                    self.best[key] = set(
                        semantic_top(data, x64, rows, query.vector, TOP_K).tolist()
                    )

    def recall(self, query: Query, found: list[int]) -> float:
        key = (query.case, query.index)
        if query.case == "lexical":
            scores, threshold, expected = self.lexical[query.index]
            if expected == 0:
                return 1.0 if not found else 0.0
            right = sum(1 for i in dict.fromkeys(found[:TOP_K]) if scores[i] >= threshold - 1e-9)
            return right / expected
        best = self.best[key]
        if not best:
            return 1.0
        return len(best & set(found[:TOP_K])) / len(best)


def pg_backend_available() -> bool:
    """Whether this tree's ``erstwhile.open`` takes a PostgreSQL URL."""
    if importlib.util.find_spec("erstwhile.store.postgres") is None:
        return False
    import erstwhile
    from erstwhile.domain.errors import InvalidInput

    try:
        erstwhile.open("postgresql://bench@127.0.0.1:1/none", embedder="none",
                       background_jobs=False).close()  # fmt: skip
    except InvalidInput as error:
        return "scheme" not in error.message
    except Exception:  # a refused connection: the backend exists
        return True
    return True


class PgServer:
    """A throwaway PostgreSQL started with scripts/pg-up, when no URL is given."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="erstwhile-bench-pg-")
        self.url: str | None = None

    def start(self) -> str | None:
        script = REPO / "scripts" / "pg-up"
        if not script.exists():
            return None
        done = subprocess.run(["bash", str(script), self.dir], capture_output=True, text=True)
        if done.returncode != 0:
            log(f"pg-up failed ({done.returncode}): {done.stderr.strip()[-300:]}")
            return None
        self.url = done.stdout.strip().splitlines()[-1]
        return self.url

    def stop(self) -> None:
        script = REPO / "scripts" / "pg-down"
        if self.url and script.exists():
            subprocess.run(["bash", str(script), self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def make_engines(
    workdir: Path, data: SpeedData, table: dict[str, np.ndarray], truth: Truth,
    wanted: set[str], pg_url: str | None, skipped: dict[str, str], store: Path | None = None,
) -> list[Engine]:  # fmt: skip
    from bench.engines.erstwhile_engine import ErstwhileEngine
    from bench.engines.floor import FloorEngine

    ours = ErstwhileEngine(str((store or workdir) / f"erstwhile-{data.size}.db"), ERSTWHILE,
                           table, keep=store is not None)  # fmt: skip
    engines: list[Engine] = [ours]
    if "pg" in wanted:
        if pg_url is None:
            skipped[ERSTWHILE_PG] = "no PostgreSQL backend in this tree, or no server"
        else:
            namespace = f"bench-{data.size}-{os.getpid()}-{int(time.time())}"
            engines.append(ErstwhileEngine(pg_url, ERSTWHILE_PG, table, namespace=namespace))
    factories = {
        "chroma": ("bench.engines.chroma_engine", "ChromaEngine", "Chroma"),
        "lance": ("bench.engines.lance_engine", "LanceEngine", "LanceDB"),
        "sqlitevec": ("bench.engines.sqlitevec_engine", "SqliteVecEngine", "sqlite-vec + FTS5"),
    }
    for key, (module, cls, label) in factories.items():
        if key not in wanted:
            continue
        try:
            engine_cls = getattr(importlib.import_module(module), cls)
            engines.append(engine_cls(str(workdir / key)))
        except ImportError as error:
            skipped[label] = f"not installed ({error.name}); pip install -r bench/requirements.txt"
    floor = FloorEngine(truth.bm25, data.queries.terms, truth.scopes)
    engines.append(floor)
    return engines


def run_speed(
    size: int,
    queries: int,
    *,
    seed: int = 7,
    batch: int = 1000,
    wanted: set[str] | None = None,
    store: Path | None = None,
) -> dict[str, Any]:
    """One speed run; ``store`` keeps erstwhile's file there across runs (built once,
    then reused: a 1M store takes long to write)."""
    wanted = wanted if wanted is not None else {"pg", *PEERS}
    started = time.perf_counter()
    t = time.perf_counter()
    data = generate(size, queries, seed)
    table: dict[str, np.ndarray] = {}
    for j, text in enumerate(data.queries.texts):
        table.setdefault(text, data.queries.vectors[j])
    by_case = case_queries(data, table)
    truth = Truth(data, by_case)
    log(f"speed {size:,}: data and exact answers in {time.perf_counter() - t:.1f} s; {data.stats}")

    skipped: dict[str, str] = {}
    server: PgServer | None = None
    pg_url = os.environ.get("ERSTWHILE_BENCH_PG_URL")
    if "pg" in wanted and not pg_url:
        if pg_backend_available():
            server = PgServer()
            pg_url = server.start()
        else:
            skipped[ERSTWHILE_PG] = "this tree has no PostgreSQL backend for erstwhile.open yet"
            wanted = wanted - {"pg"}
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-speed-"))
    engines: list[Engine] = []
    result: dict[str, Any] = {}
    try:
        if store is not None:
            store.mkdir(parents=True, exist_ok=True)
        engines = make_engines(workdir, data, table, truth, wanted, pg_url, skipped, store)
        ingest: dict[str, Any] = {}
        for engine in list(engines):
            t = time.perf_counter()
            try:
                info = engine.ingest(data, batch)
            except Exception as error:  # a peer that fails is reported, not fatal
                if engine.name == ERSTWHILE:
                    raise
                skipped[engine.name] = f"ingest failed: {type(error).__name__}: {error}"
                engines.remove(engine)
                engine.close()
                continue
            wall = time.perf_counter() - t
            timed = info["write_s"] + info["index_s"]
            ingest[engine.name] = {
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in info.items()},
                "wall_s": round(wall, 3),
                "records_per_s": round(size / timed, 1) if timed else None,
                # the writes alone, without the index builds the figure above counts
                "write_records_per_s": (
                    round(size / info["write_s"], 1) if info["write_s"] else None
                ),
            }
            log(f"  ingest {engine.name}: {ingest[engine.name]}")
        cases: dict[str, Any] = {}
        for case in CASES:
            cases[case] = measure_case(case, by_case[case], engines, truth)
            summary = {n: (v.get("p50_ms"), v.get("recall_at_10")) for n, v in cases[case].items()}
            log(f"  {case}: {summary}")
        from bench.engines.erstwhile_engine import ErstwhileEngine
        from bench.profile import profile_erstwhile, scope_sql

        ours = next(e for e in engines if e.name == ERSTWHILE)
        assert isinstance(ours, ErstwhileEngine)
        floor = next(e for e in engines if e.name.startswith("floor"))
        exact = exact_unfiltered(ours, floor, by_case["semantic"], truth)
        log(f"  semantic, exact (no index): {exact}")
        profile = profile_erstwhile(ours, data, by_case)
        profile["scope_sql_p50_ms"] = scope_sql(ours, by_case)
        result = {
            "size": size,
            "queries": queries,
            "seed": seed,
            "batch": batch,
            "data": data.stats,
            "engines": [e.name for e in engines],
            "engine_notes": {e.name: e.notes for e in engines if e.notes},
            "skipped": skipped,
            "ingest": ingest,
            "cases": cases,
            "semantic_exact": exact,
            "case_titles": CASE_TITLES,
            "erstwhile_profile": profile,
            "seconds": round(time.perf_counter() - started, 1),
        }
        add_ratios(result)
    finally:
        for engine in engines:
            try:
                engine.close()
            except Exception as error:
                log(f"closing {engine.name}: {error}")
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def measure_case(
    case: str, queries: list[Query], engines: list[Engine], truth: Truth
) -> dict[str, Any]:
    able = [e for e in engines if e.supports(case)]
    failed: dict[str, str] = {}
    for engine in list(able):
        try:
            for query in queries[: min(WARMUP, len(queries))]:
                engine.search(query)
        except Exception as error:  # a peer that cannot answer is reported, not fatal
            if engine.name == ERSTWHILE:
                raise
            failed[engine.name] = f"{type(error).__name__}: {str(error)[:200]}"
            able.remove(engine)
    times: dict[str, list[float]] = {e.name: [] for e in able}
    recalls: dict[str, list[float]] = {e.name: [] for e in able}
    for j, query in enumerate(queries):
        turn = able[j % len(able) :] + able[: j % len(able)]
        for engine in turn:
            t = time.perf_counter()
            try:
                found = engine.search(query)
            except Exception as error:  # reported with the case, the others go on
                if engine.name == ERSTWHILE:
                    raise
                failed[engine.name] = f"query {j}: {type(error).__name__}: {str(error)[:200]}"
                able.remove(engine)
                continue
            times[engine.name].append(time.perf_counter() - t)
            recalls[engine.name].append(truth.recall(query, found))
    scope = float(np.mean([truth.scopes[(case, q.index)].shape[0] for q in queries]))
    out: dict[str, Any] = {name: {"error": why} for name, why in failed.items()}
    for engine in able:
        out[engine.name] = {
            **latency(times[engine.name]),
            "recall_at_10": round(float(np.mean(recalls[engine.name])), 4),
            "in_scope_rows_mean": round(scope, 1),
        }
    return out


def exact_unfiltered(
    ours: Engine, floor: Engine, queries: list[Query], truth: Truth
) -> dict[str, Any]:
    """The unfiltered case with erstwhile's index switched off, beside the full-scan
    floor (one contiguous matvec), query by query: what the exact path costs over the
    cheapest honest pass over every row."""
    from bench.engines.erstwhile_engine import ErstwhileEngine, exact_path

    assert isinstance(ours, ErstwhileEngine) and ours.memory is not None
    with exact_path(ours.memory):
        out = measure_case("semantic", queries, [ours, floor], truth)
    out[ERSTWHILE]["floor_ratio"] = round(out[ERSTWHILE]["p50_ms"] / out[floor.name]["p50_ms"], 3)
    return out


def add_ratios(result: dict[str, Any]) -> None:
    """Each engine's p50, p95 and ingest rate as a multiple of erstwhile's."""
    for entries in result["cases"].values():
        base = entries.get(ERSTWHILE)
        for entry in entries.values():
            if base and "p50_ms" in entry:
                entry["p50_ratio"] = round(entry["p50_ms"] / base["p50_ms"], 3)
                entry["p95_ratio"] = round(entry["p95_ms"] / base["p95_ms"], 3)
    base_rate = result["ingest"].get(ERSTWHILE, {}).get("records_per_s")
    for entry in result["ingest"].values():
        rate = entry.get("records_per_s")
        entry["rate_ratio"] = round(rate / base_rate, 3) if rate and base_rate else None


if __name__ == "__main__":  # a quick look: python -m bench.speed 2000
    import json

    print(json.dumps(run_speed(int(sys.argv[1]), 20), indent=2))

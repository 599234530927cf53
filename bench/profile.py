"""Where erstwhile's time goes: cProfile over a few searches per case and one ingest
batch, outside the timed runs, reduced to the functions that own the most time."""

from __future__ import annotations

import cProfile
import pstats
import time
from pathlib import Path
from typing import Any

from bench.engines import Query
from bench.engines.erstwhile_engine import ErstwhileEngine, records
from bench.synth import SpeedData

TOP = 10


def label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":  # a C function: "<method 'execute' of 'sqlite3.Connection' objects>"
        return name.replace("<method ", "").replace(" objects>", "").replace("'", "")
    path = Path(filename)
    parts = path.parts
    if "erstwhile" in parts:
        short = "/".join(parts[parts.index("erstwhile") :])
    elif "site-packages" in parts:
        short = "/".join(parts[parts.index("site-packages") + 1 :][:2])
    else:
        short = path.name
    return f"{short}:{line} {name}"


def summarise(profile: cProfile.Profile, calls: int) -> dict[str, Any]:
    stats = pstats.Stats(profile)
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in table.values())  # own time of every function
    own = sorted(table.items(), key=lambda kv: -kv[1][2])[:TOP]
    cumulative = {label(k): v[3] for k, v in table.items()}
    return {
        "profiled_calls": calls,
        "own_time_top": [
            {
                "function": label(k),
                "share": round(v[2] / total, 3),
                "ms_per_call": round(v[2] * 1000 / calls, 3),
            }
            for k, v in own
        ],
        "cumulative_ms_per_call": {
            name: round(seconds * 1000 / calls, 3)
            for name, seconds in sorted(cumulative.items(), key=lambda kv: -kv[1])
            if "erstwhile/" in name
        },
    }


def profile_erstwhile(
    engine: ErstwhileEngine, data: SpeedData, by_case: dict[str, list[Query]], n: int = 20
) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": {}}
    for case, queries in by_case.items():
        profile = cProfile.Profile()
        chosen = queries[:n]
        profile.enable()
        for query in chosen:
            engine.search(query)
        profile.disable()
        summary = summarise(profile, len(chosen))
        summary["cumulative_ms_per_call"] = dict(
            list(summary["cumulative_ms_per_call"].items())[:12]
        )
        out["cases"][case] = summary
    # one ingest batch into a scratch namespace of the same file
    assert engine.memory is not None
    batch = records(data, 0, min(1000, data.size))
    for record in batch:
        record.pop("supersedes", None)
    profile = cProfile.Profile()
    t = time.perf_counter()
    profile.enable()
    engine.memory.upsert("bench-profile", batch)
    profile.disable()
    ingest = summarise(profile, 1)
    ingest["records"] = len(batch)
    ingest["wall_s_under_profiler"] = round(time.perf_counter() - t, 3)
    ingest["cumulative_ms_per_call"] = dict(list(ingest["cumulative_ms_per_call"].items())[:15])
    out["ingest_batch"] = ingest
    return out


def scope_sql(
    engine: ErstwhileEngine, by_case: dict[str, list[Query]], n: int = 20
) -> dict[str, Any]:
    """The semantic lane's scope statement (``SELECT r.rowid FROM records r WHERE
    <scope>``, read into numpy as the store does) timed alone, beside the whole
    ``SqliteStore.semantic`` call: how much of the lane is deciding the scope.
    Read-only; SQLite store only."""
    import itertools

    import numpy as np

    from erstwhile.domain.search import SearchRequest
    from erstwhile.domain.time import now_us
    from erstwhile.store.sql.scope import scope_clause

    assert engine.memory is not None
    store: Any = engine.memory.service.store
    if getattr(store, "backend", "") != "sqlite":
        return {}
    conn = store.db.conn()
    embedder_id = engine.embedder.embedder_id
    out: dict[str, Any] = {}
    for case in ("semantic", "semantic_filtered", "semantic_as_of"):
        scope_times: list[float] = []
        lane_times: list[float] = []
        rows = 0
        for query in by_case[case][:n]:
            options: dict[str, Any] = {"query_vector": query.vector.tolist()}
            if query.room is not None:
                options["filter"] = {"room": query.room}
            if query.at_us is None:
                options["include_historical"] = True
            elif case == "semantic_as_of":
                options["as_of"] = _iso(query.at_us)
            request = SearchRequest.model_validate(options)
            window = request.window(now_us())
            where, params = scope_clause(store.dialect, "r", engine.namespace, request, window)
            t = time.perf_counter()
            found = conn.execute(f"SELECT r.rowid FROM records r WHERE {where}", params)
            rows = np.fromiter(itertools.chain.from_iterable(found), dtype=np.int64).shape[0]
            scope_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.semantic(engine.namespace, request, window, embedder_id, query.vector, 10)
            lane_times.append(time.perf_counter() - t)
        scope = sorted(scope_times)[len(scope_times) // 2] * 1000
        lane = sorted(lane_times)[len(lane_times) // 2] * 1000
        out[case] = {
            "scope_statement_ms": round(scope, 3),
            "store_semantic_ms": round(lane, 3),
            "scope_share": round(scope / lane, 3) if lane else None,
            "rows": rows,
            "us_per_row": round(scope * 1000 / rows, 3) if rows else None,
        }
    return out


def _iso(us: int) -> str:
    from bench.synth import rfc3339

    return rfc3339(us)

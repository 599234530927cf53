"""Where memstrata's time goes: cProfile over a few searches per case and one ingest
batch, outside the timed runs, reduced to the functions that own the most time."""

from __future__ import annotations

import cProfile
import pstats
import time
from pathlib import Path
from typing import Any

from bench.engines import Query
from bench.engines.memstrata_engine import MemstrataEngine, records
from bench.synth import SpeedData

TOP = 10


def label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":  # a C function: "<method 'execute' of 'sqlite3.Connection' objects>"
        return name.replace("<method ", "").replace(" objects>", "").replace("'", "")
    path = Path(filename)
    parts = path.parts
    if "memstrata" in parts:
        short = "/".join(parts[parts.index("memstrata") :])
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
            if "memstrata/" in name
        },
    }


def profile_memstrata(
    engine: MemstrataEngine, data: SpeedData, by_case: dict[str, list[Query]], n: int = 20
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
    engine: MemstrataEngine, by_case: dict[str, list[Query]], n: int = 20
) -> dict[str, Any]:
    """The semantic lane's scope statement as the store runs it (a rowid plus an EXISTS
    probe into ``vectors`` per in-scope row) against the same statement without the
    probe, to show what the probe costs. Read-only; SQLite store only."""
    from memstrata.domain.search import SearchRequest
    from memstrata.domain.time import now_us
    from memstrata.store.sqlite.scope import scope_clause

    assert engine.memory is not None
    store: Any = engine.memory.service.store
    if getattr(store, "backend", "") != "sqlite":
        return {}
    conn = store.db.conn()
    embedder_id = engine.embedder.embedder_id
    out: dict[str, Any] = {}
    for case in ("semantic", "semantic_filtered", "semantic_as_of"):
        variants: dict[str, list[float]] = {"with EXISTS probe (as the store runs it)": [],
                                             "without the probe": []}  # fmt: skip
        rows = 0
        for query in by_case[case][:n]:
            options: dict[str, Any] = {"query_vector": query.vector.tolist()}
            if query.room is not None:
                options["filter"] = {"room": query.room}
            if query.at_us is None:
                options["include_historical"] = True
            elif case == "semantic_as_of":
                options["as_of"] = query.at_us and _iso(query.at_us)
            request = SearchRequest.model_validate(options)
            where, params = scope_clause("r", engine.namespace, request, request.window(now_us()))
            probe = (
                "SELECT r.rowid, EXISTS (SELECT 1 FROM vectors v WHERE v.record = r.rowid"
                f" AND v.embedder_id = ?) FROM records r WHERE {where}"
            )
            plain = f"SELECT r.rowid FROM records r WHERE {where}"
            for label_, sql, args in (
                ("with EXISTS probe (as the store runs it)", probe, [embedder_id, *params]),
                ("without the probe", plain, params),
            ):
                t = time.perf_counter()
                rows = len(conn.execute(sql, args).fetchall())
                variants[label_].append(time.perf_counter() - t)
        out[case] = {name: round(sorted(v)[len(v) // 2] * 1000, 3) for name, v in variants.items()}
        out[case]["rows"] = rows
    return out


def _iso(us: int) -> str:
    from bench.synth import rfc3339

    return rfc3339(us)

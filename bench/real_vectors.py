"""Semantic search on real sentence vectors (:mod:`bench.realtext`), side by side in one
run: erstwhile (SQLite, through its index and exact), a numpy scan of the same matrix,
and, where installed, Chroma and faiss's HNSW and IVF at several search breadths.

    python -m bench.real_vectors --size 100000 [--queries 300] [--engines ...] [--out F]

The corpus's vectors are stored as a caller gives them (no embedder in the timed path),
each record with ``room`` = one of 12 by a digest of its text (~8 % of the store each).
Queries are the corpus's held-out sentences, embedded by the same model: a real query
distribution, not noise around stored vectors. Per engine and case (unfiltered;
filtered to the query's room), after 5 warm-up queries, query j goes to every engine in
turn (the order rotating) before query j + 1; p50/p95 of each engine's own timing of
its call, and recall@10 against the exact top 10 (mean and 10th percentile). Run it
with ``OMP_NUM_THREADS=1`` (every engine single-threaded; the result records it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import realtext
from bench.engines.erstwhile_engine import exact_path, index_kind

ROOMS = 12
K = 10
Search = Callable[[np.ndarray, int | None], list[int]]


def rooms_of(texts: list[str]) -> np.ndarray:
    return np.fromiter(
        (hashlib.blake2b(t.encode(), digest_size=4).digest()[0] % ROOMS for t in texts),
        np.int64, len(texts),
    )  # fmt: skip


def exact(matrix: np.ndarray, rooms: np.ndarray) -> Search:
    """The floor: one matvec over the rows in scope (gathered when filtered)."""
    by_room = {r: np.flatnonzero(rooms == r) for r in range(ROOMS)}
    rows_of = {r: np.ascontiguousarray(matrix[ids]) for r, ids in by_room.items()}

    def search(query: np.ndarray, room: int | None) -> list[int]:
        if room is None:
            scores = matrix @ query
            ids = None
        else:
            scores = rows_of[room] @ query
            ids = by_room[room]
        top = np.argpartition(-scores, K)[:K]
        top = top[np.argsort(-scores[top], kind="stable")]
        return (top if ids is None else ids[top]).tolist()

    return search


def held_depths() -> tuple[int, ...]:
    from erstwhile.store.sqlite import graph_index

    return graph_index.DEPTHS


def erstwhile_engine(
    texts: list[str], matrix: np.ndarray, rooms: np.ndarray, workdir: str
) -> tuple[Any, Search, dict[str, float]]:
    import erstwhile

    memory = erstwhile.open(str(Path(workdir) / "real.db"), embedder="none",
                            background_jobs=False)  # fmt: skip
    started = time.perf_counter()
    spent = 0.0
    for start in range(0, len(texts), 1000):
        batch = [
            {"id": str(i), "content": texts[i], "metadata": {"room": f"r{rooms[i]}"},
             "vector": matrix[i]}
            for i in range(start, min(len(texts), start + 1000))
        ]  # fmt: skip
        t = time.perf_counter()
        memory.upsert("real", batch)
        spent += time.perf_counter() - t
    t = time.perf_counter()
    memory.service.store.dialect.build_vector_index(matrix.shape[1])  # list index and graph
    built = time.perf_counter() - t

    def search(query: np.ndarray, room: int | None) -> list[int]:
        options: dict[str, Any] = {"top_k": K, "ranking": "semantic", "ids_only": True}
        if room is not None:
            options["filter"] = {"room": f"r{room}"}
        found = memory.search("real", query_vector=query, **options)
        return [int(h.record.id) for h in found.hits]

    ingest = {"write_s": round(spent, 2), "records_per_s": round(len(texts) / spent),
              "index_s": round(built, 2),
              "wall_s": round(time.perf_counter() - started, 2)}  # fmt: skip
    return memory, search, ingest


def faiss_engines(
    matrix: np.ndarray, rooms: np.ndarray
) -> dict[str, tuple[Search, dict[str, Any]]]:
    """faiss's HNSW (M 32) at several efSearch, and IVF-Flat (4·sqrt(n) lists) at several
    nprobe, inner product on the unit rows; a filtered search asks for the room's
    members through an IDSelector."""
    import faiss

    faiss.omp_set_num_threads(1)
    n, d = matrix.shape
    out: dict[str, tuple[Search, dict[str, Any]]] = {}
    t = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 80
    hnsw.add(matrix)
    hnsw_build = time.perf_counter() - t
    t = time.perf_counter()
    lists = int(4 * np.sqrt(n))
    quantizer = faiss.IndexFlatIP(d)
    ivf = faiss.IndexIVFFlat(quantizer, d, lists, faiss.METRIC_INNER_PRODUCT)
    ivf.train(matrix[np.random.default_rng(1).choice(n, min(n, 50 * lists), replace=False)])
    ivf.add(matrix)
    ivf_build = time.perf_counter() - t
    selectors = {r: faiss.IDSelectorBatch(np.flatnonzero(rooms == r).astype(np.int64))
                 for r in range(ROOMS)}  # fmt: skip

    def make(index: Any, params: Callable[[Any], Any]) -> Search:
        def search(query: np.ndarray, room: int | None) -> list[int]:
            p = params(None if room is None else selectors[room])
            _, ids = index.search(query[None, :], K, params=p)
            return [int(i) for i in ids[0] if i >= 0]

        return search

    for ef in (32, 64, 128, 256):
        out[f"faiss HNSW ef{ef}"] = (
            make(hnsw, lambda s, ef=ef: faiss.SearchParametersHNSW(efSearch=ef, sel=s)),
            {"build_s": round(hnsw_build, 2), "M": 32, "efSearch": ef},
        )
    for probe in (8, 16, 32, 64):
        out[f"faiss IVF nprobe{probe}"] = (
            make(ivf, lambda s, p=probe: faiss.SearchParametersIVF(nprobe=p, sel=s)),
            {"build_s": round(ivf_build, 2), "lists": lists, "nprobe": probe},
        )
    return out


def chroma_engine(
    texts: list[str], matrix: np.ndarray, rooms: np.ndarray, workdir: str
) -> tuple[Search, dict[str, Any]]:
    import chromadb

    client = chromadb.PersistentClient(path=str(Path(workdir) / "chroma"))
    collection = client.create_collection("real", metadata={"hnsw:space": "cosine"})
    t = time.perf_counter()
    for start in range(0, len(texts), 1000):
        stop = min(len(texts), start + 1000)
        collection.add(
            ids=[str(i) for i in range(start, stop)],
            embeddings=matrix[start:stop],
            metadatas=[{"room": f"r{rooms[i]}"} for i in range(start, stop)],
        )
    spent = time.perf_counter() - t

    def search(query: np.ndarray, room: int | None) -> list[int]:
        where = None if room is None else {"room": f"r{room}"}
        found = collection.query(query_embeddings=[query], n_results=K, where=where,
                                 include=[])  # fmt: skip
        return [int(i) for i in found["ids"][0]]

    return search, {"write_s": round(spent, 2), "records_per_s": round(len(texts) / spent)}


def measure(
    engines: dict[str, Search],
    queries: np.ndarray,
    query_rooms: list[int | None],
    truth: list[list[int]],
) -> dict[str, dict[str, float]]:
    names = list(engines)
    times: dict[str, list[float]] = {n: [] for n in names}
    recalls: dict[str, list[float]] = {n: [] for n in names}
    for j in range(min(5, len(queries))):  # warm-up
        for name in names:
            engines[name](queries[j], query_rooms[j])
    for j in range(len(queries)):
        shift = j % len(names)
        for name in names[shift:] + names[:shift]:
            t = time.perf_counter()
            found = engines[name](queries[j], query_rooms[j])
            times[name].append(time.perf_counter() - t)
            recalls[name].append(len(set(found[:K]) & set(truth[j])) / K)
    out: dict[str, dict[str, float]] = {}
    for name in names:
        ms = sorted(x * 1000 for x in times[name])
        out[name] = {
            "p50_ms": round(statistics.median(ms), 3),
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
            "recall_at_10": round(float(np.mean(recalls[name])), 4),
            "recall_p10": round(float(np.percentile(recalls[name], 10)), 2),
            "recall_min": round(float(np.min(recalls[name])), 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    summary = __doc__.split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench.real_vectors", description=summary)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--cache", help="corpora's folder (default: ~/.cache/erstwhile-bench)")
    parser.add_argument("--engines", default="erstwhile,numpy,chroma,faiss",
                        help="comma-separated: erstwhile, numpy, chroma, faiss")  # fmt: skip
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    wanted = set(args.engines.split(","))
    folder = realtext.build(args.size, args.queries, realtext.cache_root(args.cache))
    texts, matrix, _, queries = realtext.load(folder)
    meta = json.loads((folder / "meta.json").read_text())
    rooms = rooms_of(texts)
    query_rooms = [j % ROOMS for j in range(len(queries))]
    floor = exact(matrix, rooms)
    truth = {
        "unfiltered": [floor(q, None) for q in queries],
        "filtered": [floor(q, r) for q, r in zip(queries, query_rooms, strict=True)],
    }
    result: dict[str, Any] = {
        "what": "semantic search on real sentence vectors, side by side in one run",
        "corpus": meta,
        "size": len(texts),
        "queries": len(queries),
        "filtered_scope_share": round(float(np.mean(rooms == 0)), 4),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "skipped": {},
        "ingest": {},
        "builds": {},
    }
    with tempfile.TemporaryDirectory(prefix="erstwhile-real-") as workdir:
        engines: dict[str, Search] = {}
        memory = None
        if "erstwhile" in wanted:
            memory, search, ingest = erstwhile_engine(texts, matrix, rooms, workdir)
            engines["erstwhile"] = search
            result["ingest"]["erstwhile"] = ingest
            graph = memory.service.store.dialect._vectors  # type: ignore[attr-defined]
            held = next(iter(graph._matrices.values())).graph
            result["builds"]["erstwhile"] = {
                "hnsw_build_s": round(held.built_s, 2),
                "hnsw_breadths_by_depth": dict(zip(map(str, held_depths()), held.breadths.tolist(),
                                                   strict=True))}  # fmt: skip

            def listed(query: np.ndarray, room: int | None, search: Search = search) -> list[int]:
                with index_kind(memory, "ivf"):
                    return search(query, room)

            engines["erstwhile (ivf)"] = listed
        if "numpy" in wanted:
            engines["numpy exact"] = floor
        if "chroma" in wanted:
            try:
                engines["Chroma"], result["ingest"]["Chroma"] = chroma_engine(
                    texts, matrix, rooms, workdir)  # fmt: skip
            except ImportError as error:
                result["skipped"]["Chroma"] = f"not installed ({error.name})"
        if "faiss" in wanted:
            try:
                for name, (search, built) in faiss_engines(matrix, rooms).items():
                    engines[name] = search
                    result["builds"][name] = built
            except ImportError as error:
                result["skipped"]["faiss"] = f"not installed ({error.name})"
        result["cases"] = {
            "unfiltered": measure(engines, queries, [None] * len(queries), truth["unfiltered"]),
            "filtered": measure(engines, queries, list(query_rooms), truth["filtered"]),
        }
        if memory is not None:  # erstwhile's exact path beside the scan, unfiltered
            with exact_path(memory):
                pair = {"erstwhile (exact)": engines["erstwhile"], "numpy exact": floor}
                result["cases"]["unfiltered_exact_path"] = measure(
                    pair, queries, [None] * len(queries), truth["unfiltered"])  # fmt: skip
            memory.close()
    for case in result["cases"].values():
        base = case.get("numpy exact", {}).get("p50_ms")
        for entry in case.values():
            if base:
                entry["p50_vs_numpy"] = round(entry["p50_ms"] / base, 3)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text if not args.out else args.out, file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

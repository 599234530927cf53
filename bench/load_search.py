"""Load check of the REST search route: concurrent clients against one namespace,
beside the same searches made in-process.

    python -m bench.load_search [--records 100000] [--clients 1,8,32] [--workers 1,2]
        [--seconds 20] [--rankings lexical,hybrid,semantic]
        [--out bench/results/load_search_100k.json]

Starts a real ``memstrata serve`` (temp SQLite file, hash embedder, auth on, default
policy caps, loopback) in a subprocess, loads N records through ``POST …/records`` in
batches of 1,000 (the default cap). Then, for each ranking, it measures the in-process
rate (one thread calling ``Memory.search`` back to back on the same file, no HTTP) and,
for each ``--workers`` count (``memstrata serve --workers W``) and each client count C,
runs C client threads, each with its own pooled httpx client, sending ``POST …/search``
(top_k 10, a 2-3 word query from the corpus vocabulary, a quarter of them with a
metadata filter) back to back for S seconds. Reports requests/s, client-side
p50/p95/p99 latency, and ``of_cores_x_in_process`` = requests/s ÷ (cores x in-process
searches/s); plus the ingest rate. The clients run on the same cores as the server.
Every request goes to 127.0.0.1 and every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import memstrata
from memstrata.access import Access

NAMESPACE = "bench"
BATCH = 1000
TOP_K = 10
ROOMS = 20
CLI = [sys.executable, "-c", "from memstrata.cli import main; main()"]


def vocabulary(rng: np.random.Generator, size: int = 2000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(size * 2)}
    return sorted(words)[:size]


def documents(n: int, words: list[str], rng: np.random.Generator) -> list[dict[str, Any]]:
    # Zipf-ish word choice, so some words are common and some rare, as in real text.
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    picks = rng.choice(len(words), size=(n, 12), p=weights)
    return [
        {
            "id": f"r{i:07d}",
            "content": " ".join(words[j] for j in row),
            "metadata": {"room": f"room{i % ROOMS}"},
            "tags": ["even"] if i % 2 == 0 else [],
        }
        for i, row in enumerate(picks)
    ]


def search_queries(words: list[str], rng: np.random.Generator) -> list[dict[str, Any]]:
    """2,000 searches of 2-3 common corpus words, a quarter of them with a room filter."""
    queries: list[dict[str, Any]] = []
    for q in range(2000):
        text = " ".join(rng.choice(words[:600], rng.integers(2, 4)))
        query: dict[str, Any] = {"query": text}
        if q % 4 == 0:
            query["filter"] = {"room": f"room{q % ROOMS}"}
        queries.append(query)
    return queries


def workload(records: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The records and the searches (seed 7)."""
    rng = np.random.default_rng(7)
    words = vocabulary(rng)
    docs = documents(records, words, rng)
    return docs, search_queries(words, rng)


def fresh_database(prefix: str, name: str) -> tuple[Path, Path, str]:
    """A temp folder, the database file in it, and an admin token's secret."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    db = work / name
    with memstrata.open(db, embedder="none", background_jobs=False) as m:
        _, token = Access(m.service.store).create_token(admin=True, name="bench")
    return work, db, token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    db: Path, port: int, log: Path, grpc_port: int = 0, workers: int = 1
) -> subprocess.Popen[bytes]:
    """``memstrata serve`` on ``port`` (gRPC on ``grpc_port``; 0 = off) in ``workers``
    processes, once every worker answers."""
    command = [*CLI, "--db", str(db), "--embedder", "hash", "serve", "--port", str(port),
               "--grpc-port", str(grpc_port), "--workers", str(workers),
               "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
            if workers > 1 and "worker processes" not in log.read_text():
                time.sleep(0.1)  # the supervisor says so once every worker serves
                continue
            try:
                if client.get("/healthz").status_code == 200:
                    return process
            except httpx.TransportError:
                time.sleep(0.1)  # a benchmark waiting for its server, not a test
    process.kill()
    raise RuntimeError("server did not start in 60 s")


def load(url: str, token: str, docs: list[dict[str, Any]], workers: int = 2) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    batches = [docs[i : i + BATCH] for i in range(0, len(docs), BATCH)]
    local = threading.local()

    def send(batch: list[dict[str, Any]]) -> float:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, headers=headers, timeout=600)
        started = time.perf_counter()
        response = local.client.post(f"/v1/namespaces/{NAMESPACE}/records",
                                     json={"records": batch})  # fmt: skip
        response.raise_for_status()
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        per_batch = list(pool.map(send, batches))
    seconds = time.perf_counter() - started
    return {
        "records": len(docs),
        "batch_size": BATCH,
        "concurrent_writers": workers,
        "seconds": round(seconds, 1),
        "records_per_s": round(len(docs) / seconds, 1),
        "batch_p50_ms": round(float(np.median(per_batch)) * 1000, 1),
    }


#: Opens one client's connection and yields its ``send(body) -> ok`` for the search
#: request ``body`` (the load_search JSON shape); the connection closes with the block.
Connect = Callable[[], AbstractContextManager[Callable[[dict[str, Any]], bool]]]


def drive(
    connect: Connect, ranking: str, queries: list[dict[str, Any]], clients: int,
    seconds: float, max_requests: int, *, keep_samples: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """C client threads, each on its own connection, sending searches back to back for
    S seconds (or ``max_requests`` each); requests/s and client-side latency (and every
    latency, in ms, under ``samples_ms`` with ``keep_samples``)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start_gate = threading.Barrier(clients + 1)
    deadline_box: list[float] = []

    def client_loop(index: int) -> None:
        with connect() as send:
            start_gate.wait()
            deadline = deadline_box[0]
            i = index
            while time.perf_counter() < deadline and len(latencies[index]) < max_requests:
                body = {**queries[i % len(queries)], "ranking": ranking, "top_k": TOP_K}
                i += clients
                sent = time.perf_counter()
                ok = send(body)
                took = time.perf_counter() - sent
                if not ok:
                    errors[index] += 1
                    continue
                latencies[index].append(took)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline_box.append(began + seconds)
    start_gate.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    every = np.array([x for per in latencies for x in per]) * 1000
    samples = {"samples_ms": every.tolist()} if keep_samples else {}
    return {
        **samples,
        "ranking": ranking,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": int(every.size),
        "errors": int(sum(errors)),
        "requests_per_s": round(every.size / elapsed, 1),
        "p50_ms": round(float(np.percentile(every, 50)), 1),
        "p95_ms": round(float(np.percentile(every, 95)), 1),
        "p99_ms": round(float(np.percentile(every, 99)), 1),
        "max_ms": round(float(every.max()), 1),
    }


def rest_client(url: str, token: str) -> Connect:
    """REST connections: one pooled httpx client each, ``POST …/search``."""

    @contextmanager
    def connect() -> Iterator[Callable[[dict[str, Any]], bool]]:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:

            def send(body: dict[str, Any]) -> bool:
                return http.post(f"/v1/namespaces/{NAMESPACE}/search", json=body).status_code == 200

            yield send

    return connect


def run_clients(
    url: str, token: str, ranking: str, queries: list[dict[str, Any]], clients: int,
    seconds: float, max_requests: int,
) -> dict[str, Any]:  # fmt: skip
    return drive(rest_client(url, token), ranking, queries, clients, seconds, max_requests)


def in_process(
    db: Path, ranking: str, queries: list[dict[str, Any]], seconds: float
) -> dict[str, Any]:
    """One thread calling ``Memory.search`` back to back: the rate the server is held to."""
    with memstrata.open(db, embedder="hash", background_jobs=False) as m:
        for query in queries[:5]:  # warm: the vector matrix, pages
            m.search(NAMESPACE, ranking=ranking, top_k=TOP_K, **query)
        latencies = []
        began = time.perf_counter()
        i = 0
        while time.perf_counter() - began < seconds:
            sent = time.perf_counter()
            m.search(NAMESPACE, ranking=ranking, top_k=TOP_K, **queries[i % len(queries)])
            latencies.append(time.perf_counter() - sent)
            i += 1
        elapsed = time.perf_counter() - began
    every = np.array(latencies) * 1000
    return {
        "ranking": ranking,
        "searches": int(every.size),
        "searches_per_s": round(every.size / elapsed, 1),
        "p50_ms": round(float(np.percentile(every, 50)), 2),
    }


def counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--clients", default="1,8,32", help="client counts, e.g. 1,8,32")
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 1}",
                        help="memstrata serve --workers counts, e.g. 1,2")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=20.0, help="per ranking and count")
    parser.add_argument("--max-requests", type=int, default=100_000, help="per client")
    parser.add_argument("--rankings", default="lexical,hybrid,semantic")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rankings = args.rankings.split(",")
    cores = os.cpu_count() or 1

    docs, queries = workload(args.records)
    load_before = os.getloadavg()
    work, db, token = fresh_database("memstrata-load-", "load.db")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    server = start_server(db, port, work / "server.log", workers=max(counts(args.workers)))
    try:
        print(f"loading {args.records} records through the API…", file=sys.stderr)
        ingest = load(url, token, docs)
        print(f"ingest: {ingest}", file=sys.stderr)
        with httpx.Client(base_url=url, headers=headers) as c:
            audit = c.get(f"/v1/namespaces/{NAMESPACE}/audit").json()
    finally:
        server.terminate()
        server.wait(timeout=60)
    local = {r: in_process(db, r, queries, args.seconds) for r in rankings}
    print(f"in process: {json.dumps(local)}", file=sys.stderr)
    runs = []
    for workers in counts(args.workers):
        server = start_server(db, port, work / f"server-{workers}.log", workers=workers)
        try:
            with httpx.Client(base_url=url, headers=headers) as c:
                for ranking in rankings:  # warm every worker's caches (vector matrix, pages)
                    for query in queries[: 5 * workers]:
                        c.post(f"/v1/namespaces/{NAMESPACE}/search",
                               json={**query, "ranking": ranking}).raise_for_status()  # fmt: skip
            for ranking in rankings:
                for clients in counts(args.clients):
                    result = run_clients(url, token, ranking, queries, clients, args.seconds,
                                         args.max_requests)  # fmt: skip
                    bound = cores * local[ranking]["searches_per_s"]
                    share = round(result["requests_per_s"] / bound, 3)
                    result = {"workers": workers, **result, "of_cores_x_in_process": share}
                    print(json.dumps(result), file=sys.stderr)
                    runs.append(result)
        finally:
            server.terminate()
            server.wait(timeout=60)
    report = {
        "benchmark": "load_search",
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python -m bench.load_search " + " ".join(argv or sys.argv[1:]),
        "machine": {
            "cpus": cores,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "note": "server and client threads share the same cores",
            "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        },
        "server": {
            "embedder": audit["embedder"],
            "backlog_after_load": audit["backlog"],
            "auth": "on (bearer token looked up per request)",
            "log_level": "warning",
            "db_bytes": sum(p.stat().st_size for p in work.glob("load.db*")),
        },
        "ingest": ingest,
        "in_process": list(local.values()),
        "search": runs,
    }
    shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return report


if __name__ == "__main__":
    main()

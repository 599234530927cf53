"""Load check of the REST search route: concurrent clients against one namespace,
beside the same searches made in-process.

    python -m bench.load_search [--records 100000] [--clients 1,8,32] [--workers 1,2]
        [--seconds 20] [--rankings lexical,hybrid,semantic] [--generators raw,httpx]
        [--out bench/results/load_search_100k.json]

Starts a real ``erstwhile serve`` (temp SQLite file, hash embedder, auth on, default
policy caps, loopback) in a subprocess, loads N records through ``POST …/records`` in
batches of 1,000 (the default cap). Then, for each ranking, it measures the in-process
rate: one thread calling ``Memory.search`` back to back on the same file, no HTTP, in
a process of its own with one BLAS thread (as each worker of a multi-worker server
has), after the same warm-up as the server. For each ``--workers`` count
(``erstwhile serve --workers W``) it warms the server: a few searches of each ranking,
then, at a size where the vector index answers unfiltered searches, unfiltered
semantic searches on new connections until 20 in a row report ``"index": "ivf"``
(each worker builds its index in a background thread on its first wide search; the
in-process run waits for the same). Then, for each client count C and generator, it
runs C client threads, each on its own keep-alive connection, sending ``POST …/search``
(top_k 10, a 2-3 word query from the corpus vocabulary, a quarter of them with a
metadata filter) back to back for S seconds. Every response's status must be 200 and
its body JSON with hits, or it counts as an error.

Generators: ``raw`` (plain sockets, the request bytes built per request, the response
read by ``Content-Length`` and parsed) and ``httpx`` (a pooled ``httpx.Client``). They
send the same requests; the clients run on the same cores as the server, so the
lighter one leaves the server more of them. Reports requests/s, client-side
p50/p95/p99 latency, CPU milliseconds per request of the generator (this process) and
of the server's processes (Linux), and ``of_cores_x_in_process`` = requests/s ÷
(cores x in-process searches/s); plus the ingest rate. Every request goes to 127.0.0.1
and every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import itertools
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

import erstwhile
from erstwhile.access import Access
from erstwhile.cli.serving import BLAS_THREADS
from erstwhile.store.sqlite.ann import MIN_ROWS

NAMESPACE = "bench"
BATCH = 1000
TOP_K = 10
ROOMS = 20
CLI = [sys.executable, "-c", "from erstwhile.cli import main; main()"]


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
    with erstwhile.open(db, embedder="none", background_jobs=False) as m:
        _, token = Access(m.service.store).create_token(admin=True, name="bench")
    return work, db, token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    db: Path, port: int, log: Path, grpc_port: int = 0, workers: int = 1
) -> subprocess.Popen[bytes]:
    """``erstwhile serve`` on ``port`` (gRPC on ``grpc_port``; 0 = off) in ``workers``
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


class _Wire:
    """One keep-alive HTTP/1.1 connection on a plain socket: sends pre-built requests,
    reads each response whole (status line, headers up to the blank line, a
    ``Content-Length`` body). A lighter load generator than httpx: on a machine whose
    cores the server shares, every CPU millisecond the client spends is one the server
    does not get."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.sock: socket.socket | None = None
        self.pending = b""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=60)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock.sendall(request)
            return self._response()
        except (OSError, ValueError):
            self.close()  # a broken or unparsable exchange: a new connection next time
            raise

    def _response(self) -> tuple[int, bytes]:
        data = self.pending
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += self._recv()
        head, data = data[:end].decode("latin-1"), data[end + 4 :]
        lines = head.split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise ValueError(f"a response without Content-Length: {head!r}")
        while len(data) < length:
            data += self._recv()
        self.pending = data[length:]
        return status, data[:length]

    def _recv(self) -> bytes:
        assert self.sock is not None
        chunk = self.sock.recv(262144)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.pending = None, b""


def raw_client(url: str, token: str) -> Connect:
    """REST connections on plain sockets (:class:`_Wire`): the same ``POST …/search``
    requests as :func:`rest_client`, each response's status checked to be 200 and its
    body parsed as JSON with hits, at a fraction of httpx's CPU per request."""
    address = httpx.URL(url)
    host, port = address.host, address.port or 80
    head = (
        f"POST /v1/namespaces/{NAMESPACE}/search HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: "
    ).encode()

    @contextmanager
    def connect() -> Iterator[Callable[[dict[str, Any]], bool]]:
        wire = _Wire(host, port)

        def send(body: dict[str, Any]) -> bool:
            payload = json.dumps(body).encode()
            try:
                status, answer = wire.exchange(head + b"%d\r\n\r\n" % len(payload) + payload)
                return status == 200 and "hits" in json.loads(answer)
            except (OSError, ValueError):
                return False

        try:
            yield send
        finally:
            wire.close()

    return connect


#: The load generators: how a client thread sends its searches.
GENERATORS: dict[str, Callable[[str, str], Connect]] = {"raw": raw_client, "httpx": rest_client}


def run_clients(
    url: str, token: str, ranking: str, queries: list[dict[str, Any]], clients: int,
    seconds: float, max_requests: int, generator: str = "httpx",
    server_pids: list[int] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`drive` through one generator, with the CPU seconds per request the
    generator (this process) and the server's processes spent meanwhile."""
    client_before, server_before = time.process_time(), cpu_seconds(server_pids or [])
    connect = GENERATORS[generator](url, token)
    result = drive(connect, ranking, queries, clients, seconds, max_requests)
    requests = max(1, result["requests"])
    client_ms = (time.process_time() - client_before) * 1000 / requests
    spent = {"generator": generator, "client_cpu_ms_per_request": round(client_ms, 3)}
    server = cpu_seconds(server_pids or [])
    if server is not None and server_before is not None:
        spent["server_cpu_ms_per_request"] = round((server - server_before) * 1000 / requests, 3)
    return {**result, **spent}


def cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU seconds of these live processes so far (Linux ``/proc``; None
    elsewhere or when there are none)."""
    if not pids:
        return None
    total = 0.0
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


def server_processes(server: subprocess.Popen[bytes], workers: int) -> list[int]:
    """The processes that serve: the server itself, or the supervisor's children (its
    worker processes, and the multiprocessing resource tracker, idle meanwhile);
    read from Linux ``/proc``, empty elsewhere."""
    if workers == 1:
        return [server.pid]
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a process that ended meanwhile
        if int(fields[1]) == server.pid:
            children.append(int(stat.parent.name))
    return children


def index_in_use(answer: dict[str, Any]) -> bool:
    """Whether a search answer's first hit says the vector index found it."""
    hits = answer.get("hits") or [{}]
    return hits[0].get("signals", {}).get("semantic", {}).get("index") == "ivf"


#: Unfiltered semantic searches in a row (each on a new connection, so on any worker)
#: that must report the index before the server counts as warm.
WARM_STREAK = 20
WARM_SECONDS = 180.0


def warm_server(url: str, token: str, queries: list[dict[str, Any]], rankings: list[str],
                workers: int, expect_index: bool) -> dict[str, Any]:  # fmt: skip
    """Warms every worker: a few searches of each ranking (vector matrix, pages), then,
    when the store is large enough for the vector index, unfiltered semantic searches
    on new connections until ``WARM_STREAK`` in a row report the index in use (each
    worker builds its own, in a background thread, on its first wide search)."""
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/v1/namespaces/{NAMESPACE}/search"
    began = time.perf_counter()
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        for ranking in rankings:
            for query in queries[: 5 * workers]:
                c.post(path, json={**query, "ranking": ranking}).raise_for_status()
    streak, sent = 0, 0
    unfiltered = [q for q in queries if "filter" not in q]
    while expect_index and streak < WARM_STREAK and time.perf_counter() - began < WARM_SECONDS:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
            answer = c.post(path, json={**unfiltered[sent % len(unfiltered)],
                                        "ranking": "semantic"})  # fmt: skip
        answer.raise_for_status()
        sent += 1
        if index_in_use(answer.json()):
            streak += 1
        else:
            streak = 0
            time.sleep(0.1)  # a benchmark waiting for its server's index build
    return {
        "seconds": round(time.perf_counter() - began, 1),
        "index_in_use": streak >= WARM_STREAK if expect_index else None,
    }


def warm_memory(m: erstwhile.Memory, queries: list[dict[str, Any]], ranking: str,
                expect_index: bool) -> bool | None:  # fmt: skip
    """The in-process twin of :func:`warm_server`: the same searches until one reports
    the index in use (the build runs in a background thread, as in a worker)."""
    for query in queries[:5]:
        m.search(NAMESPACE, ranking=ranking, top_k=TOP_K, **query)
    if not expect_index:
        return None
    unfiltered = [q for q in queries if "filter" not in q]
    began = time.perf_counter()
    for i in itertools.count():
        answer = m.search(NAMESPACE, ranking="semantic", top_k=TOP_K, **unfiltered[i % 50])
        if index_in_use(answer.to_json()):
            return True
        if time.perf_counter() - began > WARM_SECONDS:
            return False
        time.sleep(0.1)
    return False


def in_process(
    db: Path, ranking: str, queries: list[dict[str, Any]], seconds: float,
    expect_index: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """One thread calling ``Memory.search`` back to back, warmed as the server is: the
    rate the server is held to. Run it with one BLAS thread (:func:`in_process_child`),
    as each worker of a multi-worker server has, so it is the rate of one core."""
    with erstwhile.open(db, embedder="hash", background_jobs=False) as m:
        warm = warm_memory(m, queries, ranking, expect_index)
        latencies = []
        cpu_before = time.process_time()
        began = time.perf_counter()
        i = 0
        while time.perf_counter() - began < seconds:
            sent = time.perf_counter()
            m.search(NAMESPACE, ranking=ranking, top_k=TOP_K, **queries[i % len(queries)])
            latencies.append(time.perf_counter() - sent)
            i += 1
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu_before
    every = np.array(latencies) * 1000
    return {
        "ranking": ranking,
        "searches": int(every.size),
        "searches_per_s": round(every.size / elapsed, 1),
        "p50_ms": round(float(np.percentile(every, 50)), 2),
        "cpu_ms_per_search": round(cpu * 1000 / every.size, 3),
        "index_in_use": warm,
    }


def in_process_child(
    db: Path, ranking: str, records: int, seconds: float, expect_index: bool
) -> dict[str, Any]:
    """:func:`in_process` in a fresh process with one BLAS thread (numpy reads the
    setting once, at import, so it cannot be changed in this one)."""
    env = {**os.environ, **dict.fromkeys(BLAS_THREADS, "1")}
    code = (
        "import json, sys; from pathlib import Path; from bench import load_search as b; "
        "_, q = b.workload(int(sys.argv[3])); print(json.dumps(b.in_process(Path(sys.argv[1]), "
        "sys.argv[2], q, float(sys.argv[4]), sys.argv[5] == '1')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db), ranking, str(records), str(seconds),
         "1" if expect_index else "0"],
        env=env, capture_output=True, text=True, check=False, timeout=WARM_SECONDS + 600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"in-process run failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--clients", default="1,8,32", help="client counts, e.g. 1,8,32")
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 1}",
                        help="erstwhile serve --workers counts, e.g. 1,2")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=20.0, help="per ranking and count")
    parser.add_argument("--max-requests", type=int, default=100_000, help="per client")
    parser.add_argument("--rankings", default="lexical,hybrid,semantic")
    parser.add_argument("--generators", default="raw,httpx",
                        help="load generators run in turn: raw (plain sockets), httpx")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rankings = args.rankings.split(",")
    generators = args.generators.split(",")
    if unknown := set(generators) - set(GENERATORS):
        parser.error(f"--generators: unknown {sorted(unknown)}; choose from {sorted(GENERATORS)}")
    cores = os.cpu_count() or 1
    # the unfiltered searches' scope is the whole namespace: wide enough for the index
    expect_index = args.records >= MIN_ROWS

    docs, queries = workload(args.records)
    load_before = os.getloadavg()
    work, db, token = fresh_database("erstwhile-load-", "load.db")
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
    local = {r: in_process_child(db, r, args.records, args.seconds, expect_index) for r in rankings}
    print(f"in process: {json.dumps(local)}", file=sys.stderr)
    runs = []
    warmed = []
    for workers in counts(args.workers):
        server = start_server(db, port, work / f"server-{workers}.log", workers=workers)
        try:
            warm = warm_server(url, token, queries, rankings, workers, expect_index)
            warmed.append({"workers": workers, **warm})
            print(f"warm: {warmed[-1]}", file=sys.stderr)
            pids = server_processes(server, workers)
            for ranking in rankings:
                for clients in counts(args.clients):
                    for generator in generators:
                        result = run_clients(url, token, ranking, queries, clients,
                                             args.seconds, args.max_requests, generator,
                                             pids)  # fmt: skip
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
            "db_bytes": sum(p.stat().st_size for p in work.glob("load.db*") if p.is_file()),
        },
        "ingest": ingest,
        "in_process": list(local.values()),
        "warm": warmed,
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

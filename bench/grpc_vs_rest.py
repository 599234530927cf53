"""gRPC against REST: search requests/s of one ``erstwhile serve``, both wires, same run.

    python -m bench.grpc_vs_rest [--records 10000] [--clients 1,8] [--seconds 5]
        [--rounds 3] [--rankings lexical,hybrid,semantic]
        [--out bench/results/grpc_vs_rest_10k.json]

Starts a real ``erstwhile serve`` (temp SQLite file, hash embedder, auth on, default
caps, loopback) with REST and gRPC on free ports, loads N records through REST (the
data and queries of ``bench.load_search``: 12 Zipf words per record, 2-3 word queries,
a quarter of them with a metadata filter), then, per ranking and client count, runs
``--rounds`` rounds of S seconds per wire, alternating which wire goes first, so load
swings on this shared machine hit both alike. Each client thread has its own
connection (a pooled httpx client; a grpcio channel) and sends top-10 searches back
to back. Reported per case: requests/s and client-side p50/p95 per wire over all
rounds, and gRPC/REST ratios. The server answers both from the same service, so the
difference is the wire: HTTP/1.1 + JSON + FastAPI against HTTP/2 + protobuf + grpcio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np

from bench.common import machine, stamp, write_json
from bench.load_search import (
    NAMESPACE,
    TOP_K,
    Connect,
    drive,
    free_port,
    fresh_database,
    load,
    rest_client,
    start_server,
    workload,
)
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc import semantic_pb2_grpc

MODES = {"lexical": pb.SEARCH_MODE_SPARSE, "semantic": pb.SEARCH_MODE_DENSE,
         "hybrid": pb.SEARCH_MODE_HYBRID, "auto": pb.SEARCH_MODE_AUTO}  # fmt: skip


def grpc_client(target: str, token: str) -> Connect:
    """gRPC connections: one channel each, ``Semantic/Search`` with the token metadata."""
    metadata = (("x-erstwhile-capability", f"Bearer {token}"),)

    @contextmanager
    def connect() -> Iterator[Callable[[dict[str, Any]], bool]]:
        with grpc.insecure_channel(target) as channel:
            stub = semantic_pb2_grpc.SemanticStub(channel)

            def send(body: dict[str, Any]) -> bool:
                request = pb.SearchRequest(
                    namespace=NAMESPACE, query_text=body["query"], mode=MODES[body["ranking"]],
                    top_k=body["top_k"], filter=body.get("filter", {}),
                )  # fmt: skip
                try:
                    stub.Search(request, metadata=metadata, timeout=60)
                except grpc.RpcError:
                    return False
                return True

            yield send

    return connect


def merged(runs: list[dict[str, Any]], latencies: list[float]) -> dict[str, Any]:
    seconds = sum(run["seconds"] for run in runs)
    requests = sum(run["requests"] for run in runs)
    return {
        "requests": requests,
        "errors": sum(run["errors"] for run in runs),
        "seconds": round(seconds, 1),
        "requests_per_s": round(requests / seconds, 1),
        "p50_ms": round(float(np.median(latencies)), 2),
        "p95_ms": round(float(np.percentile(latencies, 95)), 2),
        "rounds_requests_per_s": [run["requests_per_s"] for run in runs],
    }


def compare(
    wires: dict[str, Connect], ranking: str, queries: list[dict[str, Any]], clients: int,
    seconds: float, rounds: int,
) -> dict[str, Any]:  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in wires}
    samples: dict[str, list[float]] = {name: [] for name in wires}
    for round_ in range(rounds):
        order = list(wires) if round_ % 2 == 0 else list(reversed(wires))
        for name in order:
            run = drive(wires[name], ranking, queries, clients, seconds, max_requests=10**6,
                        keep_samples=True)  # fmt: skip
            samples[name] += run.pop("samples_ms")
            runs[name].append(run)
    result: dict[str, Any] = {"ranking": ranking, "clients": clients}
    for name in wires:
        result[name] = merged(runs[name], samples[name])
    result["grpc_over_rest_requests_per_s"] = round(
        result["grpc"]["requests_per_s"] / result["rest"]["requests_per_s"], 2
    )
    result["grpc_over_rest_p50"] = round(result["grpc"]["p50_ms"] / result["rest"]["p50_ms"], 2)
    print(json.dumps({k: result[k] for k in ("ranking", "clients",
                                             "grpc_over_rest_requests_per_s")}),
          file=sys.stderr)  # fmt: skip
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--clients", default="1,8", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=5.0, help="per wire and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rankings", default="lexical,hybrid,semantic")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    docs, queries = workload(args.records)
    load_before = os.getloadavg()
    work, db, token = fresh_database("erstwhile-grpc-bench-", "bench.db")
    port, grpc_port = free_port(), free_port()
    url, target = f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}"
    server = start_server(db, port, work / "server.log", grpc_port=grpc_port)
    try:
        print(f"loading {args.records} records through REST…", file=sys.stderr)
        ingest = load(url, token, docs)
        wires = {"rest": rest_client(url, token), "grpc": grpc_client(target, token)}
        for name, connect in wires.items():  # warm both paths and the store's caches
            with connect() as send:
                for ranking in args.rankings.split(","):
                    for query in queries[:5]:
                        body = {**query, "ranking": ranking, "top_k": TOP_K}
                        assert send(body), f"{name} {ranking} warm-up failed"
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            audit = c.get(f"/v1/namespaces/{NAMESPACE}/audit").json()
        cases = [
            compare(wires, ranking, queries, int(clients), args.seconds, args.rounds)
            for clients in args.clients.split(",")
            for ranking in args.rankings.split(",")
        ]
    finally:
        server.terminate()
        server.wait(timeout=60)
    report = {
        "benchmark": "grpc_vs_rest",
        "when": stamp(),
        "command": "python -m bench.grpc_vs_rest " + " ".join(argv or sys.argv[1:]),
        "machine": {
            **machine(),
            "grpcio": grpc.__version__,
            "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "note": "server and client threads share the same cores",
        },
        "server": {
            "embedder": audit["embedder"],
            "backlog_after_load": audit["backlog"],
            "auth": "on (token looked up per request on both wires)",
            "log_level": "warning",
        },
        "ingest": ingest,
        "cases": cases,
    }
    shutil.rmtree(work, ignore_errors=True)
    if args.out:
        write_json(args.out, report)
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()

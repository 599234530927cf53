"""A real HTTP server on 127.0.0.1 speaking whatever a test scripts, and reply builders."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from erstwhile.embedding import HashEmbedder


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int


Reply = tuple[int, dict[str, str], Any]  # status, headers, JSON body (or str sent as-is)
Responder = Callable[[Received, int], Reply]  # (request, 1-based call number) -> reply


@dataclass
class FakeServer:
    url: str
    requests: list[Received] = field(default_factory=list)
    respond: Responder | None = None


def reference_vectors(texts: list[str], dimensions: int) -> np.ndarray:
    """What the fake servers answer: unnormalised, to prove the client normalises."""
    return HashEmbedder(dimensions).embed_documents(texts) * 3.0


def openai_reply(request: Received, dimensions: int = 8) -> dict[str, Any]:
    body = request.body
    size = body.get("dimensions", dimensions)
    vectors = reference_vectors(body["input"], size)
    data = [
        {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
        for i, vector in enumerate(vectors)
    ]
    return {"object": "list", "data": data, "model": body["model"]}


def ollama_reply(request: Received, dimensions: int = 8) -> dict[str, Any]:
    vectors = reference_vectors(request.body["input"], dimensions)
    return {"model": request.body["model"], "embeddings": vectors.tolist()}


def serve() -> tuple[FakeServer, Callable[[], None]]:
    """Start a fake server; returns it and the function that stops it."""
    lock = threading.Lock()
    fake = FakeServer(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            received = Received(
                path=self.path,
                headers={k: v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
                client_port=self.client_address[1],
            )
            with lock:
                fake.requests.append(received)
                number = len(fake.requests)
            assert fake.respond is not None, "the test did not set server.respond"
            status, headers, payload = fake.respond(received, number)
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    return fake, stop


@contextmanager
def running() -> Iterator[FakeServer]:
    """A fake server for the block (a fixture's ``with running() as fake: yield fake``)."""
    fake, stop = serve()
    try:
        yield fake
    finally:
        stop()

"""A tiny rerank server, run as its own process: ``python rerank_server.py [mode]``.

It prints its port, then answers ``POST /rerank`` as the rerank API does: a document's
relevance is the share of the query's words it contains (a deterministic stand-in for
a cross-encoder). Modes script a bad server: ``short`` leaves the last document
unscored, ``twice`` scores the first document twice, ``error`` answers HTTP 400.
Every request body is appended to the file named by ``RERANK_LOG``.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def relevance(query: str, document: str) -> float:
    words = {w.strip("?.,!").lower() for w in query.split()}
    found = {w.strip("?.,!").lower() for w in document.split()}
    return len(words & found) / max(len(words), 1)


class Handler(BaseHTTPRequestHandler):
    mode = "ok"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if os.environ.get("RERANK_LOG"):
            with open(os.environ["RERANK_LOG"], "a") as log:
                log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if self.path != "/rerank" or self.mode == "error":
            self._reply(400, {"error": "bad request"})
            return
        docs = body["documents"]
        results = [
            {"index": i, "relevance_score": relevance(body["query"], d)} for i, d in enumerate(docs)
        ]
        results.sort(key=lambda r: -r["relevance_score"])  # servers reply best first
        if self.mode == "short":
            results = [r for r in results if r["index"] != len(docs) - 1]
        if self.mode == "twice":
            results.append(dict(results[0]))
        self._reply(200, {"results": results})

    def _reply(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    Handler.mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()

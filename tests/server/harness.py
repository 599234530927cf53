"""A real ``erstwhile serve`` process for tests: a temp database, a free loopback
port, a config file, and tokens made the way an operator makes them.

The server's stderr (structured JSON logs) is drained on a thread into ``lines``; the
fixture waits for uvicorn's "running" line (an event, never a sleep) before handing
the server out.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import erstwhile
from erstwhile.access import Access

STARTUP_SECONDS = 60.0
CLI = [sys.executable, "-c", "from erstwhile.cli import main; main()"]

# The caps the test servers (and the embedded side of the conformance suite) run with.
TEST_POLICY = {
    "max_top_k": 50,
    "max_candidate_k": 200,
    "max_records_per_upsert": 20,
    "max_content_bytes": 2000,
    "max_max_rows": 100,
    "max_body_bytes": 64 * 1024,
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(path: Path, *, policy: dict[str, int] | None = None, extra: str = "") -> Path:
    caps = "\n".join(f"{key} = {value}" for key, value in (policy or TEST_POLICY).items())
    path.write_text(f'[embedding]\nprovider = "hash"\n\n[policy]\n{caps}\n{extra}')
    return path


def run_cli(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``erstwhile --db DB ARGS…`` in a subprocess, as an operator would run it."""
    return subprocess.run(
        [*CLI, "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@dataclass
class Server:
    url: str
    db: Path | str  # a SQLite file, or a PostgreSQL URL
    process: subprocess.Popen[str]
    grpc_target: str = ""  # host:port of the gRPC service beside REST
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def token(
        self,
        *,
        read_only: bool = False,
        admin: bool = False,
        namespaces: Sequence[str] = (),
        name: str | None = None,
    ) -> tuple[str, str]:
        """A new token (id, secret), written to the server's database directly."""
        with erstwhile.open(self.db, embedder="none", background_jobs=False) as m:
            token, secret = Access(m.service.store).create_token(
                name=name, read_only=read_only, admin=admin, namespaces=namespaces
            )
        return token.id, secret

    def http(self, secret: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def logs(self) -> list[dict[str, Any]]:
        found = []
        for line in list(self.lines):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def wait_for_log(
        self, matches: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """The first log entry ``matches`` accepts, waiting for stderr to deliver it."""

        def found() -> dict[str, Any] | None:
            return next((entry for entry in self.logs() if matches(entry)), None)

        with self.changed:
            entry = self.changed.wait_for(found, timeout)
        assert entry is not None, "no such log line:\n" + "\n".join(self.lines[-20:])
        return entry

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


@dataclass(frozen=True)
class Tokens:
    """The secrets of one token of each kind the server tests use."""

    admin: str
    writer: str
    reader: str
    scoped: str  # read + write, only in namespace "scoped"
    writer_id: str


def make_tokens(server: Server) -> Tokens:
    writer_id, writer = server.token(name="writer")
    return Tokens(
        admin=server.token(admin=True, name="admin")[1],
        writer=writer,
        reader=server.token(read_only=True, name="reader")[1],
        scoped=server.token(namespaces=["scoped"], name="scoped")[1],
        writer_id=writer_id,
    )


def start_server(
    db: Path | str, config: Path | None, *args: str, env: dict[str, str] | None = None
) -> Server:
    """Starts ``erstwhile serve`` and returns once it accepts connections (gRPC on a
    free port of its own unless ``args`` name one)."""
    port = free_port()
    grpc_port = free_port()
    command = [*CLI, "--db", str(db), "serve", "--port", str(port)]
    if "--grpc-port" not in args:
        command += ["--grpc-port", str(grpc_port)]
    command += args
    if config is not None:
        command += ["--config", str(config)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    server = Server(
        url=f"http://127.0.0.1:{port}", db=db, process=process, grpc_target=f"127.0.0.1:{grpc_port}"
    )
    ready = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with server.changed:
                server.lines.append(line.rstrip("\n"))
                server.changed.notify_all()
            if "Uvicorn running on" in line or "worker processes" in line:  # 1 or N workers
                ready.set()
        ready.set()  # the process ended: let the waiter look

    threading.Thread(target=drain, name="erstwhile-server-stderr", daemon=True).start()
    if not ready.wait(STARTUP_SECONDS) or process.poll() is not None:
        server.stop()
        raise RuntimeError("erstwhile serve did not start:\n" + "\n".join(server.lines[-30:]))
    return server

"""Jobs against hostile input under a real ``erstwhile serve`` (issue #43, items 1-5).

A mine job over a folder holding a FIFO, a socket, a device node (as root), names in
three broken encodings and ordinary files; a second mine job of the same namespace
posted while the first may still run; an extract job whose provider (a real HTTP
server) answers with a 400-digit confidence, nesting 100,000 deep and a lone
surrogate. Every POST answers, ``/healthz`` answers throughout, every job ends
(``done``), the ordinary files are mined and the refusals are logged by name. Then,
with an extract job stuck in a provider call that never returns, SIGTERM stops the
server within :data:`STOP_SECONDS`, and no job row is left ``running``.

Figures: ``hostile jobs ended`` (job rows that reached an end), ``healthz answers``,
``SIGTERM stops within 10 s``."""

from __future__ import annotations

import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.embedding.fake_server import FakeServer, Received, running
from tests.faults.figures import FIGURES
from tests.faults.server import assert_answer
from tests.server.harness import Server, start_server, write_config

import erstwhile

STOP_SECONDS = 10.0
DEEP = 100_000
ANSWERS = [
    '{"entities": [{"name": "Ada", "kind": "person"}, {"name": "Apollo", "kind": "project"}],'
    ' "facts": [{"subject": "Ada", "predicate": "works_on", "object": "Apollo",'
    ' "confidence": ' + "9" * 400 + "}]}",
    '{"entities": ' + "[" * DEEP + "]" * DEEP + "}",
    '{"entities": [{"name": "Ada\\ud800", "kind": "person"}], "facts": []}',
]
BROKEN_NAMES = ("café.md".encode("latin-1"), "日本語.md".encode("shift_jis"), b"\xff.md")


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    with running() as fake:
        yield fake


def hostile_answers(request: Received, n: int) -> tuple[int, dict[str, str], Any]:
    content = ANSWERS[(n - 1) % len(ANSWERS)]
    return 200, {}, {"choices": [{"index": 0, "message": {"content": content}}]}


def start(root: Path, provider: FakeServer) -> tuple[Server, httpx.Client]:
    config = write_config(root / "erstwhile.toml", extra=(
        f'\n[server]\nmine_roots = ["{root}"]\n\n[extraction]\nprovider = "http"\n'
        f'base_url = "{provider.url}/v1"\nmax_attempts = 1\ntimeout = 60\n'
    ))  # fmt: skip
    server = start_server(root / "server.db", config)
    admin = server.token(admin=True, name="admin")[1]
    return server, server.http(admin)


def healthy(server: Server) -> None:
    response = httpx.get(server.url + "/healthz", timeout=STOP_SECONDS)
    assert response.status_code == 200
    FIGURES.add("healthz answers")


def post_job(client: httpx.Client, **body: object) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=body, timeout=STOP_SECONDS)
    assert_answer(response)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def ended(server: Server, client: httpx.Client, job_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] != "running":
            FIGURES.add("hostile jobs ended")
            return job
        assert time.monotonic() < deadline, job
        healthy(server)  # the server answers while the job runs
        time.sleep(0.05)  # the job runs in the server; the client only follows it


def test_hostile_folders_and_answers_under_serve(tmp_path: Path, provider: FakeServer) -> None:
    provider.respond = hostile_answers
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("Ada works on Apollo.\n")
    (folder / "sub" / "b.txt").write_text("Grace uses Cobol.\n")
    (folder / "c.md").write_text("Linus owns Linux.\n")
    os.mkfifo(folder / "pipe.md")
    for name in BROKEN_NAMES:
        Path(os.fsdecode(os.path.join(os.fsencode(folder), name))).write_text("never mined")
    refused = ["pipe.md", "sock.md", "caf\\xe9.md", "\\xff.md"]
    if os.geteuid() == 0:
        os.mknod(folder / "tty.md", stat.S_IFCHR | 0o600, os.makedev(5, 0))
        refused.append("tty.md")
    server, client = start(tmp_path, provider)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(folder / "sock.md"))
            first = post_job(client, type="mine", namespace="docs", path=str(folder))
            second = post_job(client, type="mine", namespace="docs", path=str(folder))
            healthy(server)
            jobs = [ended(server, client, first["id"]), ended(server, client, second["id"])]
        assert [j["state"] for j in jobs] == ["done", "done"], jobs
        extract = post_job(client, type="extract", namespace="docs")
        assert ended(server, client, extract["id"])["state"] == "done"
        listed = client.get("/v1/jobs").json()["jobs"]
        assert {j["state"] for j in listed} == {"done"}, listed
        assert len(provider.requests) >= 3  # each hostile answer was met at least once
        messages = " ".join(str(entry.get("msg", "")) for entry in server.logs())
        assert all(f"{name} left out" in messages for name in refused), messages[-2000:]
    finally:
        server.stop()
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as memory:
        records = memory.service.store.origin_records("docs", str(folder.resolve()))
        assert sorted(r.content for r in records) == [
            "Ada works on Apollo.",
            "Grace uses Cobol.",
            "Linus owns Linux.",
        ]
        assert memory.entities("docs") == []  # every answer was refused, none crashed
    if os.geteuid() != 0:
        pytest.skip("the device node needs root (os.mknod); the rest ran")


def test_sigterm_stops_the_server_while_a_job_is_stuck(
    tmp_path: Path, provider: FakeServer
) -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck(request: Received, n: int) -> tuple[int, dict[str, str], Any]:
        entered.set()
        release.wait(120)  # a provider that does not answer while the server stops
        return hostile_answers(request, n)

    provider.respond = stuck
    folder = tmp_path / "f"
    folder.mkdir()
    for i in range(50):
        (folder / f"note{i:02}.md").write_text(f"Note {i} says Ada works on Apollo.\n")
    server, client = start(tmp_path, provider)
    try:
        post_job(client, type="mine", namespace="docs", path=str(folder))
        post_job(client, type="extract", namespace="docs")
        assert entered.wait(60), "the extract job never called its provider"
        healthy(server)
        began = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=STOP_SECONDS)  # TimeoutExpired fails the test
        FIGURES.add("SIGTERM stops within 10 s")
        FIGURES.add("SIGTERM stop ms", int((time.monotonic() - began) * 1000))
    finally:
        release.set()
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(30)
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as memory:
        states = {j["state"] for j in memory.service.jobs("docs")}
    assert "running" not in states and "interrupted" in states, states

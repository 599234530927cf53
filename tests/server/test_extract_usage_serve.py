"""An extract job's provider figures and budget through the real interfaces: a real
``erstwhile serve`` process (REST) and the CLI's real entry point, both extracting
through the ``http`` extractor from a fake model on a real HTTP server."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.embedding.fake_server import FakeServer, running
from tests.support.chat_model import Model, tokens_for

import erstwhile

from .harness import run_cli, start_server, write_config

JOB_SECONDS = 60.0
NOTES = [f"P{i} works on Q{i}" for i in range(5)]


@pytest.fixture
def chat() -> Iterator[FakeServer]:
    with running() as fake:
        model = Model()
        fake.respond = model
        yield fake
        model.release.set()


def _config(path: Path, chat: FakeServer, budget: str) -> Path:
    extraction = (
        f'\n[extraction]\nprovider = "http"\nmodel = "tiny-llm"\nbase_url = "{chat.url}/v1"\n'
        f"timeout = 10\nmax_attempts = 2\nbackoff_base = 0.001\n{budget}\n"
    )
    return write_config(path, extra=extraction)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("ERSTWHILE_")}


def _ended(client: httpx.Client, job_id: int) -> dict[str, Any]:
    """The job's row once it is no longer running."""
    done = threading.Event()
    job: dict[str, Any] = {}
    for _ in range(int(JOB_SECONDS / 0.05)):
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] != "running" or done.wait(0.05):
            break
    return job


def _extract_jobs(client: httpx.Client) -> list[dict[str, Any]]:
    """The namespace's extract jobs once none is running (the one a write queued too)."""
    done = threading.Event()
    jobs: list[dict[str, Any]] = []
    for _ in range(int(JOB_SECONDS / 0.05)):
        jobs = [j for j in client.get("/v1/jobs?namespace=n").json()["jobs"]
                if j["type"] == "extract"]  # fmt: skip
        if (jobs and all(j["state"] != "running" for j in jobs)) or done.wait(0.05):
            break
    return jobs


def test_rest_jobs_show_the_figures_and_keep_to_the_budget(
    tmp_path: Path, chat: FakeServer
) -> None:
    config = _config(tmp_path / "m.toml", chat, "max_calls = 2")
    server = start_server(tmp_path / "m.db", config, "--no-auth", env=_env())
    try:
        with server.http() as client:
            records = [{"content": text, "kind": "note"} for text in NOTES]
            written = client.post("/v1/namespaces/n/records", json={"records": records})
            assert written.status_code == 200, written.text
            (queued,) = _extract_jobs(client)  # the write queued one, with the config's budget
            assert (queued["state"], queued["done"], queued["usage"]["calls"]) == ("done", 2, 2)
            assert queued["stopped"].startswith("budget: max_calls 2 reached")
            for bad, field in (({"max_calls": 0}, "max_calls"), ({"max_tokens": "9"}, "max_tokens"),
                               ({"max_calls": True}, "max_calls")):  # fmt: skip
                refused = client.post("/v1/jobs", json={"type": "extract", "namespace": "n", **bad})
                assert refused.status_code == 400 and field in refused.text, refused.text
            refused = client.post("/v1/jobs", json={"type": "embed", "namespace": "n",
                                                    "max_calls": 3})  # fmt: skip
            assert refused.status_code == 400 and "extract jobs only" in refused.text
            with erstwhile.Client(server.url) as remote:  # the Python client says the same
                report = remote.extract("n", max_calls=1)
            assert (report.extracted, report.remaining) == (1, 2)
            assert report.usage is not None and report.usage["calls"] == 1
            assert report.stopped is not None and "max_calls 1" in report.stopped
            started = client.post(
                "/v1/jobs", json={"type": "extract", "namespace": "n", "max_calls": 5}
            )
            assert started.status_code == 202, started.text
            job = _ended(client, started.json()["id"])
            listed = client.get("/v1/jobs").json()["jobs"]
            audit = client.get("/v1/namespaces/n/audit").json()
    finally:
        server.stop()
    assert (job["state"], job["done"], "stopped" not in job) == ("done", 2, True)
    spent = [tokens_for(text) for text in NOTES[3:]]
    assert job["usage"] == {
        "calls": 2, "retries": 0, "failed": 0, "unreadable": 0,
        "tokens_in": sum(i for i, _ in spent), "tokens_out": sum(o for _, o in spent),
        "provider_ms": job["usage"]["provider_ms"],
    }  # fmt: skip
    assert job in listed and audit["jobs"][-1] == job and audit["extraction_backlog"] == 0
    assert all("usage" not in j for j in listed if j["type"] == "embed")


def test_the_cli_extract_command_and_audit_show_the_figures(
    tmp_path: Path, chat: FakeServer
) -> None:
    db, config = tmp_path / "m.db", _config(tmp_path / "m.toml", chat, "max_tokens = 1000000")
    env = {**_env(), "COLUMNS": "400"}  # a table's cells on one line each
    for text in NOTES[:3]:
        added = run_cli(db, "--config", str(config), "add", text, env=env)
        assert added.returncode == 0, added.stderr
    refused = run_cli(db, "--config", str(config), "extract", "--max-calls", "0", env=env)
    assert refused.returncode == 2 and "--max-calls" in refused.stderr
    first = run_cli(db, "--config", str(config), "extract", "--max-calls", "1", env=env)
    assert first.returncode == 0, first.stderr
    tokens_in, tokens_out = tokens_for(NOTES[0])
    assert "extracted 1 record with http:tiny-llm" in first.stdout
    assert f"provider: 1 calls (0 retried, 0 failed, 0 unreadable), tokens {tokens_in} in / " \
           f"{tokens_out} out" in first.stdout  # fmt: skip
    assert "stopped: budget: max_calls 1 reached" in first.stdout
    second = run_cli(db, "--config", str(config), "extract", "--json", env=env)
    report = json.loads(second.stdout)
    assert (report["extracted"], report["remaining"], report["stopped"]) == (2, 0, None)
    assert report["usage"]["calls"] == 2 and report["usage"]["tokens_in"] == sum(
        tokens_for(text)[0] for text in NOTES[1:3]
    )
    audit = run_cli(db, "--config", str(config), "audit", env=env)
    assert audit.returncode == 0, audit.stderr
    assert "1 calls (0 retried" in audit.stdout and "2 calls (0 retried" in audit.stdout
    assert "budget: max_calls 1" in audit.stdout
    listed = json.loads(run_cli(db, "--config", str(config), "audit", "--json", env=env).stdout)
    assert [j["usage"]["calls"] for j in listed["jobs"] if j["type"] == "extract"] == [1, 2]

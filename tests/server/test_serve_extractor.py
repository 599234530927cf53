"""``erstwhile serve`` reads the extractor from where a user is told to set it: the
global ``--extractor`` option (before or after ``serve``) and ``ERSTWHILE_EXTRACTOR``,
not only the ``[extraction]`` table's double-underscore variable. Each case runs a real
server process, files a note over REST and has it extracted by an ``extract`` job."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from . import harness
from .harness import CLI, Server, start_server, write_config

JOB_SECONDS = 60.0
NOTE = "Ada Lovelace works on Erstwhile. Erstwhile depends on SQLite."


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ERSTWHILE_")}
    return {**env, **extra}


def _extracted_names(server: Server) -> set[str]:
    """Files the note, runs an extract job to its end, and lists the entities."""
    with server.http() as client:
        written = client.post(
            "/v1/namespaces/n/records", json={"records": [{"content": NOTE, "kind": "note"}]}
        )
        assert written.status_code == 200, written.text
        audit = client.get("/v1/namespaces/n/audit").json()
        assert audit["extractor"] == "heuristic", audit
        started = client.post("/v1/jobs", json={"type": "extract", "namespace": "n"})
        assert started.status_code == 202, started.text
        job_id = started.json()["id"]
        done = threading.Event()
        job: dict[str, object] = {}
        for _ in range(int(JOB_SECONDS / 0.05)):  # polls the job's state until it ends
            job = client.get(f"/v1/jobs/{job_id}").json()
            if job["state"] not in ("queued", "running") or done.wait(0.05):
                break
        assert job["state"] == "done", job
        listed = client.get("/v1/namespaces/n/entities").json()["entities"]
    return {entity["name"] for entity in listed}


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--extractor", "heuristic"), {}),  # after serve
        ((), {"ERSTWHILE_EXTRACTOR": "heuristic"}),
        ((), {"ERSTWHILE_EXTRACTION__PROVIDER": "heuristic"}),  # the config's own variable
    ],
    ids=["option", "variable", "config-variable"],
)
def test_serve_runs_the_extractor_it_is_given(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str]
) -> None:
    server = start_server(
        tmp_path / "m.db", write_config(tmp_path / "m.toml"), "--no-auth", *args, env=_env(**env)
    )
    try:
        assert {"Ada Lovelace", "Erstwhile", "SQLite"} <= _extracted_names(server)
    finally:
        server.stop()


def test_the_option_before_serve_counts_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # start_server puts --db first; --extractor before the command is the documented form
    monkeypatch.setattr(harness, "CLI", [*CLI, "--extractor", "heuristic"])
    server = start_server(tmp_path / "m.db", write_config(tmp_path / "m.toml"), "--no-auth")
    try:
        assert "Ada Lovelace" in _extracted_names(server)
    finally:
        server.stop()


def test_without_an_extractor_the_job_says_how_to_turn_it_on(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "m.db", write_config(tmp_path / "m.toml"), "--no-auth", env=_env()
    )
    try:
        with server.http() as client:
            refused = client.post("/v1/jobs", json={"type": "extract", "namespace": "n"})
    finally:
        server.stop()
    assert refused.status_code == 400
    assert "--extractor" in refused.json()["error"]["message"]

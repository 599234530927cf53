"""A database that cannot be used is ``erstwhile.storage.unavailable`` (HTTP 503),
raised inside the store: a file that is not a database, a server that is not there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.raw import GARBAGE, spoil_sqlite_file
from typer.testing import CliRunner

import erstwhile
from erstwhile.adapters.rest import create_app
from erstwhile.cli import app
from erstwhile.config import Settings


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(GARBAGE)
    with pytest.raises(erstwhile.StorageUnavailable) as raised:
        erstwhile.open(path, embedder="none")
    assert raised.value.code == "erstwhile.storage.unavailable"
    assert str(path) in raised.value.message
    assert path.read_bytes() == GARBAGE  # nothing was written over it

    result = CliRunner().invoke(app, ["--db", str(path), "search", "x"])
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"error: erstwhile.storage.unavailable: cannot open database {path}: "
    )
    assert "Traceback" not in result.output


def test_an_unreachable_postgres_server() -> None:
    url = f"postgresql://erstwhile@127.0.0.1:{closed_port()}/memory?connect_timeout=5"
    with pytest.raises(erstwhile.StorageUnavailable) as raised:
        erstwhile.open(url, embedder="none")
    assert "cannot connect to postgresql://erstwhile@127.0.0.1:" in raised.value.message

    result = CliRunner().invoke(app, ["--db", url, "get", "x"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: erstwhile.storage.unavailable: cannot connect to ")
    assert "Traceback" not in result.output


def test_rest_answers_503_when_the_file_stops_being_a_database(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    memory = erstwhile.open(path, embedder="hash", background_jobs=False)
    memory.add("ns", "written before")
    spoil_sqlite_file(memory, path)  # the next request opens the file anew
    settings = Settings.model_validate({"auth": {"enabled": False}})
    with TestClient(create_app(memory.service, settings)) as client:
        answer = client.post("/v1/namespaces/ns/search", json={"query": "written"})
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "erstwhile.storage.unavailable"
    assert str(path) in error["message"]

"""``erstwhile serve`` and ``erstwhile token …`` as an operator runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import erstwhile
from erstwhile.cli import app

from .harness import run_cli, start_server, write_config


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ERSTWHILE_"):
            monkeypatch.delenv(name)


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", str(db), "--embedder", "hash", *args])
    return result.exit_code, result.stdout, result.stderr


def test_refuses_a_public_address_without_auth(tmp_path: Path) -> None:
    done = run_cli(tmp_path / "m.db", "serve", "--host", "0.0.0.0", "--no-auth", "--port", "1")
    assert done.returncode == 2
    assert "erstwhile.input.invalid" in done.stderr
    assert "loopback" in done.stderr and "Traceback" not in done.stderr


def test_refuses_auth_off_from_the_environment_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    monkeypatch.setenv("ERSTWHILE_AUTH__ENABLED", "false")
    monkeypatch.setenv("ERSTWHILE_SERVER__HOST", "10.1.2.3")
    code, _, err = invoke(tmp_path / "m.db", "serve")
    assert code == 2
    assert "server.host '10.1.2.3' is not a loopback address" in err


def test_a_missing_or_broken_config_file_is_a_clear_error(tmp_path: Path, clean_env: None) -> None:
    code, _, err = invoke(tmp_path / "m.db", "serve", "--config", str(tmp_path / "nope.toml"))
    assert code == 2 and "does not exist" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[policy]\nmax_top_k = 'ten'\n")
    code, _, err = invoke(tmp_path / "m.db", "serve", "--config", str(bad))
    assert code == 2 and "config.policy.max_top_k" in err


def test_no_auth_on_loopback_serves_as_local(tmp_path: Path) -> None:
    db = tmp_path / "open.db"
    server = start_server(db, write_config(tmp_path / "m.toml"), "--no-auth")
    try:
        with server.http() as client:
            written = client.post("/v1/namespaces/n/records", json={"records": [{"content": "hi"}]})
            assert written.status_code == 200
            assert client.get("/v1/namespaces").json()["namespaces"][0]["name"] == "n"
    finally:
        server.stop()
    with erstwhile.open(db, embedder="none", background_jobs=False) as m:
        assert {entry.actor for entry in m.service.store.ledger("n")} == {"local"}


def test_token_create_list_disable(tmp_path: Path, clean_env: None) -> None:
    db = tmp_path / "t.db"
    code, out, err = invoke(db, "token", "create", "--read-only", "-n", "notes", "--name", "bot")
    assert code == 0, err
    secret = out.strip()
    assert secret.startswith("mst_") and "shown only now" in err

    code, out, _ = invoke(db, "token", "create", "--admin", "--json")
    created = json.loads(out)
    assert created["capabilities"] == ["admin", "read", "write"]
    assert created["namespaces"] == [] and created["token"].startswith("mst_")

    code, out, _ = invoke(db, "token", "list", "--json")
    listed = json.loads(out)
    assert [t["name"] for t in listed] == ["bot", created["id"]]
    assert listed[0]["capabilities"] == ["read"] and listed[0]["namespaces"] == ["notes"]
    assert secret not in out and created["token"] not in out  # never shown again
    with erstwhile.open(db, embedder="none", background_jobs=False) as m:
        stored = m.service.store.tokens()
    assert all(secret not in repr(token) for token in stored)  # stored hashed

    code, _, err = invoke(db, "token", "disable", created["id"])
    assert code == 0 and created["id"] in err
    code, out, _ = invoke(db, "token", "list")
    assert "disabled" in out and "active" in out


def test_token_create_refuses_contradictions(tmp_path: Path, clean_env: None) -> None:
    db = tmp_path / "t.db"
    code, _, err = invoke(db, "token", "create", "--read-only", "--admin")
    assert code == 2 and "read-only and admin" in err
    code, _, err = invoke(db, "token", "create", "-n", "Bad Name")
    assert code == 2 and "namespace 'Bad Name' is invalid" in err
    code, _, err = invoke(db, "token", "disable", "tok_missing")
    assert code == 1 and "erstwhile.not_found" in err


def test_server_logs_are_one_json_line_per_event_without_colour(tmp_path: Path) -> None:
    server = start_server(tmp_path / "m.db", write_config(tmp_path / "erstwhile.toml"))
    try:
        server.wait_for_log(lambda entry: "Uvicorn running" in entry.get("msg", ""))
        with server.http(server.token(admin=True)[1]) as client:
            assert client.get("/v1/namespaces").status_code == 200
        server.wait_for_log(lambda entry: entry.get("path") == "/v1/namespaces")
    finally:
        server.stop()
    raw = "\n".join(server.lines)
    assert "\x1b[" not in raw and "\\u001b" not in raw  # no terminal colour codes
    entries = server.logs()
    assert all("color_message" not in entry for entry in entries)
    messages = [entry["msg"] for entry in entries]
    assert len(messages) == len(set(zip(messages, (e["ts"] for e in entries), strict=True)))
    assert messages.count("MCP streamable HTTP sessions started (read-only and read/write)") == 1
    assert not [m for m in messages if m.startswith("StreamableHTTP session manager")]

"""One real ``erstwhile serve`` for the fault suite's wire tests (auth on, small caps),
and the SPEC §13 error shape every refusal must have."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.faults.figures import FIGURES
from tests.server.harness import Server, start_server, write_config

import erstwhile
from erstwhile.access import Access
from erstwhile.adapters.rest_models import HTTP_STATUS


@dataclass(frozen=True)
class Secrets:
    admin: str
    writer: str
    reader: str
    scoped: str  # read + write in namespace "own" only
    disabled: str


def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Secrets]]:
    root: Path = tmp_path_factory.mktemp("faults-server")
    server = start_server(root / "server.db", write_config(root / "erstwhile.toml"))
    disabled_id, disabled = server.token(name="disabled")
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as m:
        Access(m.service.store).disable(disabled_id)
    secrets = Secrets(
        admin=server.token(admin=True, name="admin")[1],
        writer=server.token(name="writer")[1],
        reader=server.token(read_only=True, name="reader")[1],
        scoped=server.token(namespaces=["own"], name="scoped")[1],
        disabled=disabled,
    )
    yield server, secrets
    server.stop()


def assert_answer(response: httpx.Response) -> None:
    """No 5xx (counted in the figures), and a refusal has the SPEC §13 shape: a JSON
    ``{"error": {"code", "message"}}`` whose code maps to the status received."""
    FIGURES.add("wire requests")
    if response.status_code >= 500:
        FIGURES.add("5xx")
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code < 400:
        return
    assert response.headers.get("content-type") == "application/json", response.headers
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    code, message = body["error"]["code"], body["error"]["message"]
    assert isinstance(message, str) and message, body
    if response.status_code == 405:
        assert code == "erstwhile.input.invalid"
        return
    assert code in HTTP_STATUS, body
    assert HTTP_STATUS[code] == response.status_code, body

"""The REST ``mine`` job: admin only, an absolute path under the server's
``mine_roots``, run on the server and followed through ``GET /v1/jobs/{id}``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import erstwhile
from erstwhile.access import Access
from erstwhile.adapters.rest import create_app
from erstwhile.config import Settings


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str], erstwhile.Memory]]:
    allowed = tmp_path / "allowed"
    (allowed / "notes").mkdir(parents=True)
    (allowed / "notes" / "a.md").write_text("# Alpha\n\nThe first note.\n\nThe second note.\n")
    (tmp_path / "elsewhere").mkdir()
    memory = erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False)
    access = Access(memory.service.store)
    secrets = {
        "admin": access.create_token(admin=True)[1],
        "writer": access.create_token()[1],
    }
    settings = Settings(server={"mine_roots": [str(allowed)]})
    with TestClient(create_app(memory.service, settings)) as client:
        yield client, secrets, memory
    memory.close()


def post_job(client: TestClient, secret: str, **body: object) -> tuple[int, dict[str, Any]]:
    response = client.post("/v1/jobs", json=body, headers={"Authorization": f"Bearer {secret}"})
    return response.status_code, response.json()


def test_an_admin_mines_a_folder_under_the_roots(
    served: tuple[TestClient, dict[str, str], erstwhile.Memory], tmp_path: Path
) -> None:
    client, secrets, memory = served
    folder = str(tmp_path / "allowed" / "notes")
    status, job = post_job(client, secrets["admin"], type="mine", namespace="docs", path=folder)
    assert (status, job["type"], job["namespace"]) == (202, "mine", "docs")
    headers = {"Authorization": f"Bearer {secrets['admin']}"}
    deadline = time.monotonic() + 30
    while job["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)  # the job runs on the server's thread; the client only follows it
        job = client.get(f"/v1/jobs/{job['id']}", headers=headers).json()
    assert (job["state"], job["done"]) == ("done", 1)
    records = memory.service.store.origin_records("docs", str(Path(folder).resolve()))
    assert [r.content for r in records] == ["Alpha\n\nThe first note.\n\nThe second note."]
    token_id = memory.service.store.tokens()[0].id
    assert {e.actor for e in memory.service.store.ledger("docs")} == {token_id}


def test_mine_jobs_are_refused_clearly(
    served: tuple[TestClient, dict[str, str], erstwhile.Memory], tmp_path: Path
) -> None:
    client, secrets, memory = served
    admin, writer = secrets["admin"], secrets["writer"]
    inside = str(tmp_path / "allowed" / "notes")
    cases = [
        (writer, {"path": inside}, 403, "admin"),
        (admin, {}, 400, "path is required"),
        (admin, {"path": "notes"}, 400, "must be absolute"),
        (admin, {"path": str(tmp_path / "elsewhere")}, 403, "server.mine_roots"),
        (admin, {"path": inside + "/../../elsewhere"}, 403, "server.mine_roots"),
        (admin, {"path": inside + "/a.md"}, 400, "not a folder"),
        (admin, {"path": inside, "include": [""]}, 400, "include"),
    ]
    for secret, extra, status, words in cases:
        code, body = post_job(client, secret, type="mine", namespace="docs", **extra)
        assert (code, words in body["error"]["message"]) == (status, True), (extra, body)
    code, body = post_job(client, admin, type="embed", namespace="docs", path=inside)
    assert code == 400 and "mine jobs only" in body["error"]["message"]
    assert memory.service.store.jobs() == []  # nothing was started

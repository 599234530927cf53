"""``create_app`` over a service the caller opened (embedding the API in another app)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

import erstwhile
from erstwhile.access import Access
from erstwhile.adapters.rest import create_app
from erstwhile.config import Settings


def test_serves_a_given_service_and_leaves_it_open(tmp_path: Path) -> None:
    memory = erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False)
    _, secret = Access(memory.service.store).create_token(read_only=True)
    app = create_app(memory.service, Settings())
    with TestClient(app) as client:
        client.headers["Authorization"] = f"Bearer {secret}"
        memory.add("ns", "written in process")
        found = client.post("/v1/namespaces/ns/search", json={"query": "process"}).json()
        assert [hit["record"]["content"] for hit in found["hits"]] == ["written in process"]
        refused = client.post("/v1/namespaces/ns/records", json={"records": [{"content": "x"}]})
        assert refused.status_code == 403
    # the app did not own the service: it is still open after the app shut down
    assert memory.search("ns", "process").ids() == [found["hits"][0]["record"]["id"]]
    memory.close()

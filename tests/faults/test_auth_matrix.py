"""The auth matrix: every REST route the server publishes, under every kind of token.
No token, an unknown or a disabled one: 401. A token without the route's capability,
or outside its namespaces: 403, decided before the body is read. Otherwise the route
answers (never 401/403). A route not in ROUTES fails the test: add it here."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.faults.figures import FIGURES
from tests.faults.server import Secrets, assert_answer
from tests.server.harness import Server

READ, WRITE, ADMIN = "read", "write", "admin"

# (method, path template) -> (capability, a body that is valid for the route)
ROUTES: dict[tuple[str, str], tuple[str, Any]] = {
    ("POST", "/v1/namespaces/{ns}/records"): (WRITE, {"records": [{"id": "m", "content": "x"}]}),
    ("GET", "/v1/namespaces/{ns}/records/{id}"): (READ, None),
    ("DELETE", "/v1/namespaces/{ns}/records/{id}"): (WRITE, None),
    ("POST", "/v1/namespaces/{ns}/records/{id}/invalidate"): (WRITE, {}),
    ("POST", "/v1/namespaces/{ns}/records/{id}/verify"): (ADMIN, {"reviewer": "r"}),
    ("PUT", "/v1/namespaces/{ns}/records/{id}/embedding"): (WRITE, {"vector": [1.0] * 256}),
    ("GET", "/v1/namespaces/{ns}/records/{id}/history"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/records/{id}/ledger"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/changes"): (READ, None),
    ("POST", "/v1/namespaces/{ns}/search"): (READ, {"query": "x"}),
    ("POST", "/v1/namespaces/{ns}/expire"): (
        WRITE, {"filter": {"k": "v"}, "action": "invalidate", "max_rows": 1},
    ),
    ("GET", "/v1/namespaces"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/audit"): (READ, None),
    ("POST", "/v1/jobs"): (ADMIN, {"type": "embed", "namespace": "{ns}"}),
    ("GET", "/v1/jobs/{job_id}"): (ADMIN, None),
    ("GET", "/v1/jobs"): (ADMIN, None),
    ("POST", "/v1/namespaces/{ns}/facts"): (
        WRITE, {"subject": "a", "predicate": "p", "object": "b"},
    ),
    ("POST", "/v1/namespaces/{ns}/records/{id}/mentions"): (WRITE, {"entities": [{"name": "A"}]}),
    ("GET", "/v1/namespaces/{ns}/entities"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/entities/{entity}"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/entities/{entity}/relationships"): (READ, None),
    ("GET", "/v1/namespaces/{ns}/entities/{entity}/mentions"): (READ, None),
}  # fmt: skip
PUBLIC = {("GET", "/healthz")}
# tokens: name -> (capabilities, namespaces it may use; None = all)
TOKENS: dict[str, tuple[set[str], set[str] | None]] = {
    "admin": ({READ, WRITE, ADMIN}, None),
    "writer": ({READ, WRITE}, None),
    "reader": ({READ}, None),
    "scoped": ({READ, WRITE}, {"own"}),
}


def published(server: Server) -> set[tuple[str, str]]:
    schema = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    return {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}


def test_every_published_route_is_in_the_matrix(served: tuple[Server, Secrets]) -> None:
    server, _ = served
    assert published(server) - PUBLIC == set(ROUTES), "add new routes to ROUTES"


def _request(server: Server, secret: str | None, route: tuple[str, str], ns: str) -> httpx.Response:
    method, template = route
    _, body = ROUTES[route]
    path = template.format(ns=ns, id="m", job_id=1, entity="ent_none")
    if body is not None and "namespace" in body:
        body = {**body, "namespace": ns}
    headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
    return httpx.request(method, server.url + path, json=body, headers=headers, timeout=60)


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: f"{r[0]} {r[1]}")
def test_auth_matrix(served: tuple[Server, Secrets], route: tuple[str, str]) -> None:
    server, secrets = served
    capability, _ = ROUTES[route]
    namespaced = "{ns}" in route[1] or route == ("POST", "/v1/jobs")
    for secret in (None, "mst_not-a-token", secrets.disabled):
        response = _request(server, secret, route, "own")
        assert_answer(response)
        assert response.status_code == 401, (route, secret, response.text)
    for name, (capabilities, namespaces) in TOKENS.items():
        for ns in ("own", "elsewhere"):
            response = _request(server, getattr(secrets, name), route, ns)
            assert_answer(response)
            FIGURES.add("auth matrix cells")
            allowed = capability in capabilities and (
                namespaces is None or not namespaced or ns in namespaces
            )
            if allowed:
                assert response.status_code not in (401, 403), (route, name, ns, response.text)
            else:
                assert response.status_code == 403, (route, name, ns, response.text)


def test_metrics_and_mcp_need_a_token(served: tuple[Server, Secrets]) -> None:
    server, secrets = served
    for path, method in (("/metrics", "GET"), ("/mcp", "POST")):
        for secret in (None, "mst_not-a-token", secrets.disabled):
            headers = {"Authorization": f"Bearer {secret}"} if secret else {}
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            response = httpx.request(
                method, server.url + path, headers=headers, json=ping, timeout=30
            )
            FIGURES.add("auth matrix cells")
            assert response.status_code == 401, (path, secret, response.text[:300])
    assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200


def test_expire_hard_delete_needs_admin(served: tuple[Server, Secrets]) -> None:
    server, secrets = served
    body = {"filter": {"k": "v"}, "action": "hard_delete", "max_rows": 1}
    for name, status in (("writer", 403), ("scoped", 403), ("admin", 200)):
        response = httpx.post(
            f"{server.url}/v1/namespaces/own/expire", json=body, timeout=30,
            headers={"Authorization": f"Bearer {getattr(secrets, name)}"},
        )  # fmt: skip
        assert_answer(response)
        assert response.status_code == status, (name, response.text)

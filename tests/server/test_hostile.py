"""Defects found by probing the REST server as an attacker would (issue 14), each
reproduced over the wire against a real ``erstwhile serve``."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from .conftest import Tokens
from .harness import Server
from .test_rest import error_of, upsert

DIMS = 256  # the test server's hash embedder


def vector(first: float, rest: float = 0.0) -> list[float]:
    return [first] + [rest] * (DIMS - 1)


# -- 1. one bad vector must not break every search of a namespace -------------------------


@pytest.mark.parametrize(
    ("label", "body"),
    [
        ("overflows float64", b'{"vector": [1e400' + b", 0" * (DIMS - 1) + b"]}"),
        ("overflows float32", None),
        ("all zeros", None),
    ],
    ids=["1e400", "1e39", "zeros"],
)
def test_set_embedding_refuses_unusable_vectors(
    writer: httpx.Client, ns: str, label: str, body: bytes | None
) -> None:
    upsert(writer, ns, {"id": "car", "content": "I drive a red car"})
    path = f"/v1/namespaces/{ns}/records/car/embedding"
    if body is None:
        values = vector(1e39) if label == "overflows float32" else vector(0.0)
        response = writer.put(path, json={"vector": values})
    else:
        response = writer.put(path, content=body, headers={"content-type": "application/json"})
    assert "vector" in error_of(response, 400, "erstwhile.input.invalid")
    for ranking in ("auto", "semantic", "hybrid", "lexical"):
        found = writer.post(
            f"/v1/namespaces/{ns}/search", json={"query": "car", "ranking": ranking}
        )
        assert found.status_code == 200, (ranking, found.text)
        assert found.json()["hits"][0]["record"]["id"] == "car"


@pytest.mark.parametrize("values", [vector(1e39), vector(0.0), vector(float("1e-46"))])
def test_upsert_refuses_unusable_vectors(
    writer: httpx.Client, ns: str, values: list[float]
) -> None:
    response = writer.post(
        f"/v1/namespaces/{ns}/records", json={"records": [{"content": "car", "vector": values}]}
    )
    assert "records[0].vector" in error_of(response, 400, "erstwhile.input.invalid")
    nothing = writer.post(f"/v1/namespaces/{ns}/search", json={"query": "car"})
    assert nothing.status_code == 200 and nothing.json()["hits"] == []


@pytest.mark.parametrize("values", [vector(1e39), vector(0.0), [1.0, 0.0]])
def test_query_vector_is_checked_like_a_stored_one(
    writer: httpx.Client, ns: str, values: list[float]
) -> None:
    upsert(writer, ns, {"id": "car", "content": "I drive a red car"})
    response = writer.post(f"/v1/namespaces/{ns}/search", json={"query_vector": values})
    assert "query_vector" in error_of(response, 400, "erstwhile.input.invalid")


def test_large_finite_vectors_are_stored_as_unit_vectors(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "big", "content": "big numbers", "vector": vector(3e38, 3e38)})
    found = writer.post(
        f"/v1/namespaces/{ns}/search", json={"query_vector": vector(1.0, 1.0), "top_k": 1}
    ).json()
    assert found["hits"][0]["record"]["id"] == "big"
    assert found["hits"][0]["score"] == pytest.approx(1.0, abs=1e-5)


# -- 2. numbers past 64 bits ---------------------------------------------------------------


@pytest.mark.parametrize("version", ["9223372036854775808", str(10**30)])
def test_huge_version_is_not_found(writer: httpx.Client, ns: str, version: str) -> None:
    upsert(writer, ns, {"id": "readme", "content": "read me"})
    response = writer.get(f"/v1/namespaces/{ns}/records/readme", params={"version": version})
    error_of(response, 404, "erstwhile.not_found")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("search", {"query": "x", "top_k": 10**30}, "top_k"),
        ("search", {"query": "x", "candidate_k": 2**63}, "candidate_k"),
        ("expire", {"action": "invalidate", "max_rows": 2**64}, "max_rows"),
        ("records", {"records": [{"content": "x", "if_version": 2**63}]}, "if_version"),
    ],
)
def test_huge_counts_are_invalid_input(
    writer: httpx.Client, ns: str, path: str, body: dict[str, Any], field: str
) -> None:
    response = writer.post(f"/v1/namespaces/{ns}/{path}", json=body)
    assert field in error_of(response, 400, "erstwhile.input.invalid")


# -- 4. auth before the body ---------------------------------------------------------------


def raw_request(server: Server, head: str) -> tuple[int, bytes]:
    """Sends only a request head (no body) and reads the answer: the server must
    decide without waiting for the body it was promised."""
    url = urlparse(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head.encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data


@pytest.mark.parametrize(
    ("route", "token", "status"),
    [
        ("records", None, 401),
        ("records", "reader", 403),
        ("search", None, 401),
        ("records/x/verify", "writer", 403),
        ("records/x/embedding", "reader", 403),
        ("expire", "reader", 403),
        ("records", "scoped", 403),
    ],
)
def test_auth_is_decided_before_the_body_is_read(
    server: Server, tokens: Tokens, ns: str, route: str, token: str | None, status: int
) -> None:
    method = "PUT" if route.endswith("embedding") else "POST"
    auth = f"Authorization: Bearer {getattr(tokens, token)}\r\n" if token else ""
    head = (
        f"{method} /v1/namespaces/{ns}/{route} HTTP/1.1\r\nHost: x\r\n{auth}"
        "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
    )
    got, data = raw_request(server, head)
    assert got == status, data[:400]


def test_start_job_needs_admin_before_the_body(server: Server, tokens: Tokens) -> None:
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens.writer}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
    )
    assert raw_request(server, head)[0] == 403


# -- 5. /metrics names only the namespaces a token may see ---------------------------------


def test_metrics_show_a_scoped_token_only_its_namespaces(
    server: Server, tokens: Tokens, writer: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "a", "content": "hidden namespace"})
    with server.http(tokens.scoped) as scoped:
        upsert(scoped, "scoped", {"id": "a", "content": "visible namespace"})
        text = scoped.get("/metrics").text
    assert 'erstwhile_job_backlog{namespace="scoped"}' in text
    assert ns not in text
    assert f'erstwhile_job_backlog{{namespace="{ns}"}}' in writer.get("/metrics").text


# -- 6. strict JSON types, server-owned fields refused -------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("search", {"query": "x", "top_k": "10"}, "top_k"),
        ("search", {"query": "x", "ids_only": "yes"}, "ids_only"),
        ("search", {"query": "x", "include_historical": 1}, "include_historical"),
        ("search", {"query": "x", "top_k": 10.0}, "top_k"),
        ("search", {"query": 5}, "query"),
        ("expire", {"action": "invalidate", "max_rows": "1"}, "max_rows"),
        ("records", {"records": [{"content": "x", "tags": "a"}]}, "tags"),
        ("records", {"records": [{"content": "x", "if_version": "0"}]}, "if_version"),
        ("records", {"records": [{"content": "x", "vector": ["1"] * DIMS}]}, "vector"),
    ],
)
def test_wrong_json_types_are_refused_not_coerced(
    writer: httpx.Client, ns: str, path: str, body: dict[str, Any], field: str
) -> None:
    response = writer.post(f"/v1/namespaces/{ns}/{path}", json=body)
    assert field in error_of(response, 400, "erstwhile.input.invalid")


@pytest.mark.parametrize(
    "fields",
    [
        {"trust": "verified"},
        {"version": 7},
        {"superseded_by": "other"},
        {"created_at": "2020-01-01"},
        {"updated_at": "2020-01-01"},
    ],
)
def test_server_owned_fields_in_a_write_are_refused(
    writer: httpx.Client, ns: str, fields: dict[str, Any]
) -> None:
    body = {"records": [{"id": "a", "content": "x", **fields}]}
    response = writer.post(f"/v1/namespaces/{ns}/records", json=body)
    message = error_of(response, 400, "erstwhile.input.invalid")
    assert next(iter(fields)) in message and "set by the server" in message
    error_of(writer.get(f"/v1/namespaces/{ns}/records/a"), 404, "erstwhile.not_found")


def test_json_numbers_still_become_metadata_text(writer: httpx.Client, ns: str) -> None:
    """Strictness does not undo the documented conversion of metadata values."""
    upsert(writer, ns, {"id": "a", "content": "x", "metadata": {"n": 3, "ok": True}})
    record = writer.get(f"/v1/namespaces/{ns}/records/a").json()
    assert record["metadata"] == {"n": "3", "ok": "true"}

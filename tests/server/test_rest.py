"""The REST API over a real ``erstwhile serve`` process, driven with httpx."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx

import erstwhile

from .conftest import Tokens
from .harness import TEST_POLICY, Server


def error_of(response: httpx.Response, status: int, code: str) -> str:
    """Asserts the SPEC error body and status; returns the message."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return str(body["error"]["message"])


def upsert(client: httpx.Client, ns: str, *records: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/v1/namespaces/{ns}/records", json={"records": list(records)})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


# -- round trips ------------------------------------------------------------------------


def test_upsert_get_search_history_round_trip(writer: httpx.Client, ns: str) -> None:
    written = upsert(
        writer,
        ns,
        {
            "id": "car",
            "content": "The user drives a red car",
            "key": "user.car",
            "tags": ["vehicle"],
            "metadata": {"colour": "red", "doors": 3},
            "payload": base64.b64encode(b"\x00\x01opaque").decode(),
            "valid_from": "2024-01-01",
        },
    )
    assert written == {"ids": ["car"], "versions": [1], "warnings": []}

    record = writer.get(f"/v1/namespaces/{ns}/records/car").json()
    assert record["content"] == "The user drives a red car"
    assert record["metadata"] == {"colour": "red", "doors": "3"}
    assert record["valid_from"] == "2024-01-01T00:00:00.000000Z"
    assert base64.urlsafe_b64decode(record["payload"]) == b"\x00\x01opaque"
    assert "valid_to" not in record and "vector" not in record  # unset = absent

    revised = upsert(
        writer,
        ns,
        {
            "id": "car2",
            "content": "The user now drives a blue car",
            "supersedes": ["car"],
            "valid_from": "2025-01-01",
        },
    )
    assert revised["ids"] == ["car2"]

    found = writer.post(f"/v1/namespaces/{ns}/search", json={"query": "car"}).json()
    assert [hit["record"]["id"] for hit in found["hits"]] == ["car2"]
    assert found["ranking"] == "hybrid"
    assert found["unembedded"] == 0
    then = writer.post(
        f"/v1/namespaces/{ns}/search", json={"query": "car", "as_of": "2024-06-01"}
    ).json()
    assert [hit["record"]["id"] for hit in then["hits"]] == ["car"]
    assert then["hits"][0]["record"]["key"] == "user.car"

    history = writer.get(f"/v1/namespaces/{ns}/records/car2/history").json()
    assert [r["id"] for r in history["versions"]] == ["car", "car2"]
    assert history["versions"][0]["superseded_by"] == "car2"
    assert history["versions"][1]["key"] == "user.car"  # the key moved to the successor

    first = writer.get(f"/v1/namespaces/{ns}/records/car", params={"version": 1}).json()
    assert first["version"] == 1 and "superseded_by" not in first


def test_delete_soft_then_hard(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "alpha note"})
    assert writer.delete(f"/v1/namespaces/{ns}/records/a").status_code == 204
    soft = writer.get(f"/v1/namespaces/{ns}/records/a").json()
    assert "deleted_at" in soft
    hits = writer.post(f"/v1/namespaces/{ns}/search", json={"query": "alpha"}).json()["hits"]
    assert hits == []
    gone = writer.delete(f"/v1/namespaces/{ns}/records/a", params={"hard": "true"})
    assert gone.status_code == 204
    error_of(writer.get(f"/v1/namespaces/{ns}/records/a"), 404, "erstwhile.not_found")
    error_of(writer.get(f"/v1/namespaces/{ns}/records/a/history"), 404, "erstwhile.not_found")


def test_invalidate_and_expire(writer: httpx.Client, admin: httpx.Client, ns: str) -> None:
    upsert(
        writer,
        ns,
        {"id": "a", "content": "old alpha", "metadata": {"team": "ops"}},
        {"id": "b", "content": "old beta", "metadata": {"team": "ops"}},
        {"id": "c", "content": "old gamma", "metadata": {"team": "dev"}},
    )
    closed = writer.post(
        f"/v1/namespaces/{ns}/records/a/invalidate", json={"at": "2030-01-01T00:00:00Z"}
    )
    assert closed.json() == {"version": 2}
    assert writer.get(f"/v1/namespaces/{ns}/records/a").json()["valid_to"].startswith("2030")
    now = writer.post(f"/v1/namespaces/{ns}/records/b/invalidate")  # no body: now
    assert now.status_code == 200 and now.json() == {"version": 2}

    expired = writer.post(
        f"/v1/namespaces/{ns}/expire",
        json={"filter": {"team": "dev"}, "action": "soft_delete", "max_rows": 10},
    )
    assert expired.json() == {"affected": 1}
    error_of(
        writer.post(
            f"/v1/namespaces/{ns}/expire",
            json={"filter": {"team": "ops"}, "action": "hard_delete", "max_rows": 10},
        ),
        403,
        "erstwhile.auth.forbidden",
    )
    hard = admin.post(
        f"/v1/namespaces/{ns}/expire",
        json={"filter": {"team": "ops"}, "action": "hard_delete", "max_rows": 10},
    )
    assert hard.json() == {"affected": 2}
    error_of(writer.get(f"/v1/namespaces/{ns}/records/a"), 404, "erstwhile.not_found")


def test_verify_needs_admin(writer: httpx.Client, admin: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "a claim"})
    path = f"/v1/namespaces/{ns}/records/a/verify"
    error_of(writer.post(path, json={"reviewer": "ann"}), 403, "erstwhile.auth.forbidden")
    assert admin.post(path, json={"reviewer": "ann"}).json() == {"version": 2}
    assert writer.get(f"/v1/namespaces/{ns}/records/a").json()["trust"] == "verified"


def test_caller_vector_then_semantic_search(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "one"}, {"id": "b", "content": "two"})
    vector = [0.0] * 256
    vector[7] = 1.0
    put = writer.put(f"/v1/namespaces/{ns}/records/b/embedding", json={"vector": vector})
    assert put.status_code == 204
    found = writer.post(
        f"/v1/namespaces/{ns}/search", json={"query_vector": vector, "top_k": 1}
    ).json()
    assert found["ranking"] == "semantic"
    assert found["hits"][0]["record"]["id"] == "b"
    assert found["hits"][0]["score"] == 1.0
    short = writer.put(f"/v1/namespaces/{ns}/records/b/embedding", json={"vector": [1.0]})
    assert "256" in error_of(short, 400, "erstwhile.input.invalid")


def test_search_options_and_ids_only(writer: httpx.Client, ns: str) -> None:
    upsert(
        writer,
        ns,
        {"id": "p1", "content": "ticket alpha", "metadata": {"priority": "1"}},
        {"id": "p5", "content": "ticket beta", "metadata": {"priority": "5"}},
    )
    found = writer.post(
        f"/v1/namespaces/{ns}/search",
        json={
            "query": "ticket",
            "ranking": "lexical",
            "predicates": [{"key": "priority", "op": "GTE", "values": ["3"]}],
            "ids_only": True,
        },
    ).json()
    assert found["ranking"] == "lexical"
    assert [hit["record"] for hit in found["hits"]] == [{"id": "p5"}]


# -- auth -------------------------------------------------------------------------------


def test_no_token_unknown_token_and_disabled_token_are_401(
    server: Server, anonymous: httpx.Client, ns: str
) -> None:
    paths = [
        ("GET", "/v1/namespaces"),
        ("POST", f"/v1/namespaces/{ns}/search"),
        ("GET", f"/v1/namespaces/{ns}/records/x"),
    ]
    for method, path in paths:
        response = anonymous.request(method, path, json={"query": "x"})
        error_of(response, 401, "erstwhile.auth.unauthenticated")
        assert response.headers["www-authenticate"] == "Bearer"
    with server.http("mst_not-a-real-token") as stranger:
        error_of(stranger.get("/v1/namespaces"), 401, "erstwhile.auth.unauthenticated")
    with httpx.Client(base_url=server.url, headers={"Authorization": "Basic dTpw"}) as basic:
        error_of(basic.get("/v1/namespaces"), 401, "erstwhile.auth.unauthenticated")

    token_id, secret = server.token(name="short-lived")
    with server.http(secret) as client:
        assert client.get("/v1/namespaces").status_code == 200
        from .harness import run_cli

        disabled = run_cli(server.db, "token", "disable", token_id)
        assert disabled.returncode == 0, disabled.stderr
        message = error_of(client.get("/v1/namespaces"), 401, "erstwhile.auth.unauthenticated")
        assert "disabled" in message


def test_read_only_token_cannot_write(reader: httpx.Client, writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "readable"})
    assert reader.get(f"/v1/namespaces/{ns}/records/a").status_code == 200
    assert reader.post(f"/v1/namespaces/{ns}/search", json={"query": "readable"}).json()["hits"]
    attempts = [
        reader.post(f"/v1/namespaces/{ns}/records", json={"records": [{"content": "x"}]}),
        reader.delete(f"/v1/namespaces/{ns}/records/a"),
        reader.post(f"/v1/namespaces/{ns}/records/a/invalidate", json={}),
        reader.put(f"/v1/namespaces/{ns}/records/a/embedding", json={"vector": [1.0] * 256}),
        reader.post(
            f"/v1/namespaces/{ns}/expire",
            json={"action": "invalidate", "max_rows": 1, "all": True},
        ),
    ]
    for response in attempts:
        assert "write" in error_of(response, 403, "erstwhile.auth.forbidden")
    assert writer.get(f"/v1/namespaces/{ns}/records/a").json()["version"] == 1


def test_scoped_token_stays_in_its_namespace(
    server: Server, tokens: Tokens, writer: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "a", "content": "outside"})
    with server.http(tokens.scoped) as scoped:
        assert upsert(scoped, "scoped", {"id": "in", "content": "inside"})["ids"] == ["in"]
        assert scoped.get("/v1/namespaces/scoped/records/in").status_code == 200
        for response in (
            scoped.get(f"/v1/namespaces/{ns}/records/a"),
            scoped.post(f"/v1/namespaces/{ns}/search", json={"query": "outside"}),
            scoped.post(f"/v1/namespaces/{ns}/records", json={"records": [{"content": "x"}]}),
            scoped.get(f"/v1/namespaces/{ns}/audit"),
        ):
            assert ns in error_of(response, 403, "erstwhile.auth.forbidden")
        listed = scoped.get("/v1/namespaces").json()["namespaces"]
        assert [item["name"] for item in listed] == ["scoped"]


def test_ledger_actor_is_the_token_id(
    server: Server, tokens: Tokens, writer: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "a", "content": "who wrote me"})
    writer.delete(f"/v1/namespaces/{ns}/records/a")
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as m:
        entries = m.service.store.ledger(ns)
    assert [(entry.record_id, entry.op) for entry in entries] == [("a", "create"), ("a", "delete")]
    assert {entry.actor for entry in entries} == {tokens.writer_id}


# -- errors -----------------------------------------------------------------------------


def test_version_conflict_is_412(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "v1"})
    stale = writer.post(
        f"/v1/namespaces/{ns}/records",
        json={"records": [{"id": "a", "content": "v2", "if_version": 5}]},
    )
    assert "if_version" in error_of(stale, 412, "erstwhile.write.version_conflict")
    exists = writer.post(
        f"/v1/namespaces/{ns}/records",
        json={"records": [{"id": "a", "content": "v2", "if_version": 0}]},
    )
    error_of(exists, 412, "erstwhile.write.version_conflict")
    assert writer.get(f"/v1/namespaces/{ns}/records/a").json()["content"] == "v1"


def test_key_conflict_is_409(writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "one", "key": "k"})
    taken = writer.post(
        f"/v1/namespaces/{ns}/records",
        json={"records": [{"id": "b", "content": "two", "key": "k"}]},
    )
    error_of(taken, 409, "erstwhile.write.conflict")


def test_over_a_cap_is_422_never_truncated(writer: httpx.Client, ns: str) -> None:
    search = f"/v1/namespaces/{ns}/search"
    cap = TEST_POLICY["max_top_k"]
    message = error_of(
        writer.post(search, json={"query": "x", "top_k": cap + 1}), 422, "erstwhile.policy.limit"
    )
    assert "top_k" in message and "max_top_k" in message
    assert writer.post(search, json={"query": "x", "top_k": cap}).status_code == 200
    error_of(
        writer.post(search, json={"query": "x", "candidate_k": 10_000}),
        422,
        "erstwhile.policy.limit",
    )
    many = [{"content": f"record {i}"} for i in range(TEST_POLICY["max_records_per_upsert"] + 1)]
    records = f"/v1/namespaces/{ns}/records"
    assert "max_records_per_upsert" in error_of(
        writer.post(records, json={"records": many}), 422, "erstwhile.policy.limit"
    )
    big = {"content": "x" * (TEST_POLICY["max_content_bytes"] + 1)}
    assert "records[0].content" in error_of(
        writer.post(records, json={"records": [big]}), 422, "erstwhile.policy.limit"
    )
    rows = writer.post(
        f"/v1/namespaces/{ns}/expire",
        json={"action": "invalidate", "max_rows": TEST_POLICY["max_max_rows"] + 1, "all": True},
    )
    assert "max_max_rows" in error_of(rows, 422, "erstwhile.policy.limit")
    nothing = writer.post(search, json={"query": "record", "include_historical": True})
    assert nothing.json()["hits"] == []  # none of the refused writes happened


def test_body_size_limit(writer: httpx.Client, ns: str) -> None:
    path = f"/v1/namespaces/{ns}/records"
    huge = b'{"records": [{"content": "' + b"x" * TEST_POLICY["max_body_bytes"] + b'"}]}'
    declared = writer.post(path, content=huge, headers={"content-type": "application/json"})
    assert "max_body_bytes" in error_of(declared, 422, "erstwhile.policy.limit")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(huge), 8192):
            yield huge[start : start + 8192]

    streamed = writer.post(path, content=chunks(), headers={"content-type": "application/json"})
    assert "max_body_bytes" in error_of(streamed, 422, "erstwhile.policy.limit")


def test_malformed_json_wrong_types_unknown_fields_are_400(
    writer: httpx.Client, admin: httpx.Client, ns: str
) -> None:
    records = f"/v1/namespaces/{ns}/records"
    search = f"/v1/namespaces/{ns}/search"
    json_type = {"content-type": "application/json"}
    cases = [
        (writer.post(records, content=b'{"records": [', headers=json_type), "not valid JSON"),
        (writer.post(records, content=b"", headers=json_type), "empty"),
        (writer.post(records, content=b"[1, 2]", headers=json_type), "request"),
        (writer.post(records, json={"records": "nope"}), "records"),
        (writer.post(records, json={"records": [{"content": 5}]}), "records[0].content"),
        (writer.post(records, json={"records": [{"content": "x", "colour": 1}]}), "colour"),
        (writer.post(records, json={"records": [{"valid_from": "yesterday"}]}), "valid_from"),
        (writer.post(search, json={"query": "x", "top_k": "many"}), "top_k"),
        (writer.post(search, json={"query": "x", "bogus": True}), "bogus"),
        (writer.post(search, json={}), "query"),
        (writer.post(search, json={"query": "x", "ranking": "psychic"}), "ranking"),
        (writer.get(f"/v1/namespaces/{ns}/records/a", params={"version": "two"}), "version"),
        (writer.get(f"/v1/namespaces/{ns}/records/a", params={"version": 0}), "version"),
        (writer.post("/v1/namespaces/Not-Valid/search", json={"query": "x"}), "namespace"),
        (
            writer.post(f"/v1/namespaces/{ns}/expire", json={"action": "burn", "max_rows": 1}),
            "action",
        ),
        # verify needs admin, decided before the body is read
        (admin.post(f"/v1/namespaces/{ns}/records/a/verify", json={}), "reviewer"),
    ]
    for response, field in cases:
        message = error_of(response, 400, "erstwhile.input.invalid")
        assert field in message, (field, message)


def test_unknown_routes_and_methods(writer: httpx.Client) -> None:
    error_of(writer.get("/v1/nothing-here"), 404, "erstwhile.not_found")
    error_of(writer.put("/v1/namespaces"), 405, "erstwhile.input.invalid")


# -- operations -------------------------------------------------------------------------


def test_namespaces_audit_and_jobs(admin: httpx.Client, writer: httpx.Client, ns: str) -> None:
    upsert(writer, ns, {"id": "a", "content": "to embed"})
    listed = writer.get("/v1/namespaces").json()["namespaces"]
    assert {"name": ns, "embedder": "hash:feature-hash-v2:256"} in listed
    audit = writer.get(f"/v1/namespaces/{ns}/audit").json()
    assert audit["namespace"] == ns and audit["backlog"] == 0
    error_of(writer.get("/v1/namespaces/never-written/audit"), 404, "erstwhile.not_found")

    error_of(
        writer.post("/v1/jobs", json={"type": "embed", "namespace": ns}),
        403,
        "erstwhile.auth.forbidden",
    )
    started = admin.post("/v1/jobs", json={"type": "reindex", "namespace": ns})
    assert started.status_code == 202
    job = started.json()
    assert job["type"] == "reindex" and job["namespace"] == ns
    assert job["state"] in {"running", "done"}
    assert admin.get(f"/v1/jobs/{job['id']}").json()["id"] == job["id"]
    listed_jobs = admin.get("/v1/jobs", params={"namespace": ns}).json()["jobs"]
    assert job["id"] in [j["id"] for j in listed_jobs]
    error_of(admin.get("/v1/jobs/999999"), 404, "erstwhile.not_found")
    assert "type" in error_of(
        admin.post("/v1/jobs", json={"type": "mine-everything", "namespace": ns}),
        400,
        "erstwhile.input.invalid",
    )
    # extract is a job, but this server has no extractor: refused, naming the setting
    assert "[extraction] provider" in error_of(
        admin.post("/v1/jobs", json={"type": "extract", "namespace": ns}),
        400,
        "erstwhile.input.invalid",
    )


def test_request_id_is_echoed_and_logged(server: Server, writer: httpx.Client) -> None:
    echoed = writer.get("/v1/namespaces", headers={"X-Request-ID": "trace-abc-123"})
    assert echoed.headers["x-request-id"] == "trace-abc-123"
    fresh = writer.get("/healthz")
    generated = fresh.headers["x-request-id"]
    assert len(generated) == 32
    traced = server.wait_for_log(lambda entry: entry.get("request_id") == "trace-abc-123")
    assert traced["logger"] == "erstwhile.http" and traced["msg"] == "request"
    assert traced["route"] == "/v1/namespaces" and traced["status"] == 200
    assert traced["actor"].startswith("tok_")
    assert traced["duration_ms"] >= 0
    assert server.wait_for_log(lambda entry: entry.get("request_id") == generated)["path"] == (
        "/healthz"
    )


def test_metrics(
    writer: httpx.Client, reader: httpx.Client, anonymous: httpx.Client, ns: str
) -> None:
    error_of(anonymous.get("/metrics"), 401, "erstwhile.auth.unauthenticated")
    assert reader.get("/metrics").status_code == 200  # any enabled token may scrape
    upsert(writer, ns, {"id": "a", "content": "metric me"})
    writer.post(f"/v1/namespaces/{ns}/search", json={"query": "metric", "ranking": "lexical"})
    writer.post(f"/v1/namespaces/{ns}/search", json={"query": "metric"})
    text = writer.get("/metrics").text
    assert (
        'erstwhile_http_requests_total{method="POST",route="/v1/namespaces/{ns}/search",status="200"}'
        in text
    )
    assert 'erstwhile_http_request_duration_seconds_bucket{le="0.005",method="POST"' in text
    assert 'erstwhile_search_duration_seconds_count{ranking="lexical"}' in text
    assert 'erstwhile_search_duration_seconds_count{ranking="hybrid"}' in text
    assert "erstwhile_embedding_cache_hits_total" in text
    assert "erstwhile_embedding_cache_misses_total" in text
    assert f'erstwhile_job_backlog{{namespace="{ns}"}} 0.0' in text


def test_healthz_and_openapi(anonymous: httpx.Client) -> None:
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    schema = anonymous.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/v1/namespaces/{ns}/records",
        "/v1/namespaces/{ns}/records/{id}",
        "/v1/namespaces/{ns}/records/{id}/invalidate",
        "/v1/namespaces/{ns}/records/{id}/verify",
        "/v1/namespaces/{ns}/records/{id}/embedding",
        "/v1/namespaces/{ns}/records/{id}/history",
        "/v1/namespaces/{ns}/search",
        "/v1/namespaces/{ns}/expire",
        "/v1/namespaces",
        "/v1/namespaces/{ns}/audit",
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/healthz",
    ):
        assert path in paths, path
    search = paths["/v1/namespaces/{ns}/search"]["post"]
    body = search["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SearchRequestInput"}
    assert search["responses"]["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_a_records_ledger_and_the_audits_counts(
    writer: httpx.Client, reader: httpx.Client, anonymous: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "a/1", "content": "one", "valid_from": "2023-01-01"})
    revised = writer.post(f"/v1/namespaces/{ns}/records/a%2F1/invalidate", json={})
    assert revised.status_code == 200, revised.text
    entries = reader.get(f"/v1/namespaces/{ns}/records/a%2F1/ledger")
    assert entries.status_code == 200, entries.text
    assert [(e["op"], e["record_id"], e["version"]) for e in entries.json()["entries"]] == [
        ("create", "a/1", 1),
        ("invalidate", "a/1", 2),
    ]
    assert entries.json()["entries"][0]["at"].endswith("Z")
    error_of(reader.get(f"/v1/namespaces/{ns}/records/nope/ledger"), 404, "erstwhile.not_found")
    error_of(
        anonymous.get(f"/v1/namespaces/{ns}/records/a%2F1/ledger"),
        401,
        "erstwhile.auth.unauthenticated",
    )
    counts = reader.get(f"/v1/namespaces/{ns}/audit").json()["records"]
    assert counts == {
        "records": 1,
        "current": 0,
        "future": 0,
        "superseded": 0,
        "invalidated": 1,
        "deleted": 0,
    }

"""Record-time travel over the wire: REST (search, get, history, changes) and the
Python client against a real ``erstwhile serve``."""

from __future__ import annotations

import httpx

import erstwhile

from .harness import Server
from .test_rest import error_of, upsert


def test_known_at_search_get_history_and_changes(
    writer: httpx.Client, reader: httpx.Client, ns: str
) -> None:
    upsert(writer, ns, {"id": "f1", "content": "the launch is on june ten", "key": "launch"})
    recorded = writer.get(f"/v1/namespaces/{ns}/records/f1").json()["updated_at"]
    supersede = {"id": "f2", "content": "the launch moved to june seventeen",
                 "supersedes": ["f1"]}  # fmt: skip
    upsert(writer, ns, supersede)
    search = f"/v1/namespaces/{ns}/search"
    body = {"query": "launch", "ranking": "lexical"}
    now = reader.post(search, json=body).json()
    assert [h["record"]["id"] for h in now["hits"]] == ["f2"]
    then = reader.post(search, json={**body, "known_at": recorded}).json()
    assert [h["record"]["id"] for h in then["hits"]] == ["f1"]
    assert "superseded_by" not in then["hits"][0]["record"]  # not yet corrected then

    old = reader.get(f"/v1/namespaces/{ns}/records/f1", params={"known_at": recorded}).json()
    assert old["version"] == 1 and "superseded_by" not in old
    assert old["known_until"] > old["updated_at"]  # its record-time range
    error_of(
        reader.get(f"/v1/namespaces/{ns}/records/f2", params={"known_at": recorded}),
        404, "erstwhile.not_found",
    )  # fmt: skip
    error_of(
        reader.get(f"/v1/namespaces/{ns}/records/f1", params={"known_at": "yesterday"}),
        400, "erstwhile.input.invalid",
    )  # fmt: skip
    chain = reader.get(f"/v1/namespaces/{ns}/records/f1/history").json()["versions"]
    assert [r["id"] for r in chain] == ["f1", "f2"]
    past = reader.get(
        f"/v1/namespaces/{ns}/records/f1/history", params={"known_at": recorded}
    ).json()["versions"]
    assert [r["id"] for r in past] == ["f1"]

    changes = reader.get(f"/v1/namespaces/{ns}/changes", params={"since": "2000-01-01"}).json()
    kinds = [(c["change"], c["id"], c.get("version")) for c in changes["changes"]]
    assert kinds == [("added", "f1", 1), ("superseded", "f1", 2), ("added", "f2", 1)]
    assert changes["changes"][0]["record"]["content"] == "the launch is on june ten"
    assert "next" not in changes
    first = reader.get(
        f"/v1/namespaces/{ns}/changes", params={"since": "2000-01-01", "limit": 2}
    ).json()
    assert len(first["changes"]) == 2
    rest = reader.get(
        f"/v1/namespaces/{ns}/changes",
        params={"since": "2000-01-01", "limit": 2, "after": first["next"]},
    ).json()
    assert [c["id"] for c in rest["changes"]] == ["f2"] and "next" not in rest
    before = reader.get(
        f"/v1/namespaces/{ns}/changes", params={"since": "2000-01-01", "until": recorded}
    ).json()
    assert before["changes"] == []  # until is exclusive; f1 was recorded at that instant
    error_of(
        reader.get(f"/v1/namespaces/{ns}/changes", params={"since": recorded, "until": recorded}),
        400, "erstwhile.input.invalid",
    )  # fmt: skip


def test_the_client_reads_the_past_like_the_embedded_api(
    server: Server, tokens: object, ns: str
) -> None:
    with erstwhile.Client(server.url, token=tokens.writer) as client:  # type: ignore[attr-defined]
        client.upsert(ns, [{"id": "c1", "content": "alpha beta"}])
        recorded = client.get(ns, "c1").updated_at
        client.upsert(ns, [{"id": "c1", "content": "gamma delta"}])
        client.delete(ns, "c1")
        assert client.search(ns, "alpha", ranking="lexical").hits == []
        past = client.search(ns, "alpha", ranking="lexical", known_at=recorded)
        assert [h.record.content for h in past.hits] == ["alpha beta"]
        assert client.get(ns, "c1", known_at=recorded).known_until is not None
        assert [r.version for r in client.history(ns, "c1", known_at=recorded)] == [1]
        page = client.changes(ns, "2000-01-01")
        assert [c.change for c in page.changes] == ["added", "revised", "deleted"]
        assert page.changes[1].record is not None and page.changes[1].record.content == (
            "gamma delta"
        )
        client.delete(ns, "c1", hard=True)  # gone from the past too
        assert client.search(ns, "alpha", ranking="lexical", known_at=recorded).hits == []
        page = client.changes(ns, "2000-01-01")
        assert [c.record for c in page.changes[:3]] == [None, None, None]


def test_history_carries_record_time_and_lists_every_version_on_request(
    writer: httpx.Client, reader: httpx.Client, server: Server, tokens: object, ns: str
) -> None:
    upsert(writer, ns, {"id": "h1", "content": "the launch is on june ten"})
    upsert(writer, ns, {"id": "h1", "content": "the launch is on june eleven"})  # in place
    upsert(writer, ns, {"id": "h2", "content": "the launch moved to june seventeen",
                        "supersedes": ["h1"]})  # fmt: skip
    path = f"/v1/namespaces/{ns}/records/h1/history"
    chain = reader.get(path).json()["versions"]
    assert [(r["id"], r["version"]) for r in chain] == [("h1", 3), ("h2", 1)]
    assert all(r["known_until"] is None for r in chain)  # always there: null, current
    every = reader.get(path, params={"versions": "true"}).json()["versions"]
    assert [(r["id"], r["version"]) for r in every] == [("h1", 1), ("h1", 2), ("h1", 3),
                                                        ("h2", 1)]  # fmt: skip
    assert [r["content"] for r in every[:2]] == [
        "the launch is on june ten", "the launch is on june eleven"
    ]  # fmt: skip
    assert [r["known_until"] for r in every[:2]] == [every[1]["updated_at"], every[2]["updated_at"]]
    assert every[2]["known_until"] is None and every[3]["known_until"] is None
    then = reader.get(path, params={"versions": "true", "known_at": every[1]["updated_at"]})
    assert [r["version"] for r in then.json()["versions"]] == [1, 2]
    error_of(reader.get(path, params={"versions": "maybe"}), 400, "erstwhile.input.invalid")
    with erstwhile.Client(server.url, token=tokens.writer) as client:  # type: ignore[attr-defined]
        versions = client.history(ns, "h1", versions=True)
        assert [(r.id, r.version) for r in versions] == [(r["id"], r["version"]) for r in every]
        assert versions[0].known_until == versions[1].updated_at
        assert [r.version for r in client.history(ns, "h1")] == [3, 1]

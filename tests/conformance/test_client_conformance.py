"""One suite, two ways in: ``erstwhile.open(path)`` and ``erstwhile.Client(url)``.

Every test here runs against an embedded store and against a real ``erstwhile serve``
process through the client, with the same caps on both; both must pass the same
assertions. ``test_same_script_same_results`` then runs one scripted session on a
fresh store of each kind and compares the two transcripts value for value: records,
hits, scores, versions, and every error's class, code and message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.server.harness import TEST_POLICY, Server, start_server, write_config

import erstwhile
from erstwhile.service import Policy

CAPS = Policy(**{k: v for k, v in TEST_POLICY.items() if k != "max_body_bytes"})
HASH_ID = "hash:feature-hash-v2:256"

Store = erstwhile.Memory | erstwhile.Client


def _serve(root: Path) -> tuple[Server, str]:
    server = start_server(root / "server.db", write_config(root / "erstwhile.toml"))
    return server, server.token(admin=True, name="conformance")[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server, secret = _serve(tmp_path_factory.mktemp("conformance"))
    yield server, secret
    server.stop()


@pytest.fixture(params=["embedded", "client"])
def m(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store: Store
    if request.param == "embedded":
        store = erstwhile.open(
            tmp_path / "embedded.db", embedder="hash", background_jobs=False, policy=CAPS
        )
    else:
        server, secret = request.getfixturevalue("served")
        store = erstwhile.Client(server.url, token=secret)
    with store:
        yield store


@pytest.fixture
def ns() -> str:
    return "c-" + uuid.uuid4().hex[:12]


# -- writes and reads -----------------------------------------------------------------


def test_upsert_then_get(m: Store, ns: str) -> None:
    result = m.upsert(
        ns,
        {
            "id": "car",
            "content": "The user drives a red car",
            "key": "user.car",
            "kind": "Fact",
            "tags": ["vehicle", "vehicle", "user"],
            "metadata": {"colour": "red", "doors": 3, "electric": False},
            "payload": b"\x00\xffbinary",
            "source": "chat:42",
            "valid_from": "2024-01-01",
        },
    )
    assert isinstance(result, erstwhile.UpsertResult)
    assert (result.ids, result.versions, result.warnings) == (["car"], [1], [])
    record = m.get(ns, "car")
    assert isinstance(record, erstwhile.Record)
    assert record.content == "The user drives a red car"
    assert record.kind == "fact" and record.tags == ["vehicle", "user"]
    assert record.metadata == {"colour": "red", "doors": "3", "electric": "false"}
    assert record.payload == b"\x00\xffbinary"
    assert record.valid_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert record.trust == "unverified" and record.version == 1 and record.namespace == ns
    assert record.created_at is not None and record.created_at.tzinfo is not None
    assert record.vector is None and record.valid_to is None


def test_add_assigns_time_ordered_ids(m: Store, ns: str) -> None:
    first = m.add(ns, "first note")
    second = m.add(ns, "second note", tags=["b"])
    assert first < second and len(first) == 36
    assert m.get(ns, second).tags == ["b"]


def test_rewrite_makes_versions(m: Store, ns: str) -> None:
    m.upsert(ns, {"id": "a", "content": "v1"})
    assert m.upsert(ns, {"id": "a", "content": "v2", "if_version": 1}).versions == [2]
    assert m.get(ns, "a").content == "v2"
    assert m.get(ns, "a", version=1).content == "v1"
    with pytest.raises(erstwhile.NotFound):
        m.get(ns, "a", version=3)


def test_supersede_history_and_time_travel(m: Store, ns: str) -> None:
    m.upsert(
        ns, {"id": "old", "content": "lives in Paris", "key": "home", "valid_from": "2020-01-01"}
    )
    revised = m.supersede(
        ns, "old", {"id": "new", "content": "lives in Rome", "valid_from": "2023-01-01"}
    )
    assert revised.ids == ["new"]
    history = m.history(ns, "old")
    assert [r.id for r in history] == ["old", "new"]
    assert history[0].superseded_by == "new"
    assert history[0].valid_to == datetime(2023, 1, 1, tzinfo=UTC)
    assert history[1].key == "home" and history[1].supersedes == ["old"]
    assert m.search(ns, "lives").ids() == ["new"]
    assert m.search(ns, "lives", as_of="2021-06-01").ids() == ["old"]
    window = m.search(ns, "lives", between={"from": "2022-01-01", "until": "2024-01-01"})
    assert sorted(window.ids()) == ["new", "old"]
    assert sorted(m.search(ns, "lives", include_historical=True).ids()) == ["new", "old"]


def test_invalidate_delete_and_expire(m: Store, ns: str) -> None:
    m.upsert(
        ns,
        [
            {"id": "a", "content": "alpha", "metadata": {"team": "ops"}},
            {"id": "b", "content": "beta", "metadata": {"team": "ops"}},
            {"id": "c", "content": "gamma", "metadata": {"team": "dev"}},
        ],
    )
    assert m.invalidate(ns, "a", at="2099-01-01T00:00:00Z") == 2
    assert m.get(ns, "a").valid_to == datetime(2099, 1, 1, tzinfo=UTC)
    m.delete(ns, "b")
    assert m.get(ns, "b").deleted_at is not None
    assert m.search(ns, "beta", ranking="lexical").hits == []
    m.delete(ns, "b", hard=True)
    with pytest.raises(erstwhile.NotFound):
        m.get(ns, "b")
    assert m.expire(ns, filter={"team": "dev"}, action="soft_delete", max_rows=5) == 1
    assert m.expire(ns, filter={"team": "dev"}, action="soft_delete", max_rows=5) == 0
    assert m.expire(ns, predicates=[{"key": "team", "op": "EQ", "values": ["ops"]}],
                    action="hard_delete", max_rows=5) == 1  # fmt: skip
    with pytest.raises(erstwhile.NotFound):
        m.get(ns, "a")


@pytest.mark.parametrize("record_id", ["notes/2024/a", "100%", "x%2Fy", "a b?c#d", "ümlaut/../."])
def test_any_printable_id_is_addressable(m: Store, ns: str, record_id: str) -> None:
    """Ids are 1-256 printable characters (SPEC §2): '/', '%' and the rest included,
    in every call that names a record in the path."""
    m.upsert(ns, {"id": record_id, "content": "first"})
    m.upsert(ns, {"id": record_id, "content": "second"})
    assert m.get(ns, record_id).content == "second"
    assert m.get(ns, record_id, version=1).content == "first"
    assert [r.content for r in m.history(ns, record_id)] == ["second"]
    m.set_embedding(ns, record_id, [1.0] + [0.0] * 255)  # derived: no new version
    assert m.search(ns, query_vector=[1.0] + [0.0] * 255).ids() == [record_id]
    assert m.invalidate(ns, record_id, at="2099-01-01T00:00:00Z") == 3
    assert m.verify(ns, record_id, "reviewer") == 4
    m.delete(ns, record_id, hard=True)
    with pytest.raises(erstwhile.NotFound):
        m.get(ns, record_id)


def test_verify(m: Store, ns: str) -> None:
    m.upsert(ns, {"id": "a", "content": "a claim"})
    assert m.verify(ns, "a", "reviewer-ann") == 2
    assert m.get(ns, "a").trust == "verified"
    assert m.search(ns, "claim", min_trust="verified").ids() == ["a"]


def test_search_scope_and_shapes(m: Store, ns: str) -> None:
    m.upsert(
        ns,
        [
            {"id": "t1", "content": "ticket about login", "tags": ["bug"], "metadata": {"p": "1"}},
            {"id": "t2", "content": "ticket about search", "tags": ["bug"], "metadata": {"p": "5"}},
            {
                "id": "t3",
                "content": "ticket about billing",
                "kind": "decision",
                "metadata": {"p": "9"},
            },
        ],
    )
    lexical = m.search(ns, "ticket login", ranking="lexical")
    assert isinstance(lexical, erstwhile.SearchResult)
    assert lexical.ranking == "lexical" and lexical.ids()[0] == "t1"
    assert lexical.hits[0].signals["lexical"]["rank"] == 1
    hybrid = m.search(ns, "ticket")
    assert hybrid.ranking == "hybrid" and hybrid.unembedded == 0
    assert set(hybrid.hits[0].signals) == {"lexical", "semantic"}
    assert sorted(m.search(ns, "ticket", tags=["bug"]).ids()) == ["t1", "t2"]
    assert m.search(ns, "ticket", kind="decision").ids() == ["t3"]
    assert m.search(ns, "ticket", filter={"p": "5"}).ids() == ["t2"]
    where = m.search(ns, "ticket", predicates=[{"key": "p", "op": "GT", "values": ["3"]}])
    assert sorted(where.ids()) == ["t2", "t3"]
    ids_only = m.search(ns, "ticket", ids_only=True, top_k=2)
    assert ids_only.ids() == hybrid.ids()[:2]
    assert [hit["record"] for hit in ids_only.to_json()["hits"]] == [
        {"id": i} for i in hybrid.ids()[:2]
    ]
    with_vectors = m.search(ns, "billing", include_vector=True, top_k=1)
    assert with_vectors.hits[0].record.vector is not None
    assert len(with_vectors.hits[0].record.vector) == 256


def test_caller_vectors(m: Store, ns: str) -> None:
    m.upsert(ns, [{"id": "a", "content": "one"}, {"id": "b", "content": "two"}])
    vector = [0.0] * 256
    vector[3] = 1.0
    m.set_embedding(ns, "b", vector)
    found = m.search(ns, query_vector=vector, top_k=1)
    assert found.ranking == "semantic" and found.ids() == ["b"]
    assert found.hits[0].score == pytest.approx(1.0)


def test_embed_jobs_and_embedder(m: Store, ns: str) -> None:
    m.upsert(ns, {"content": "already embedded inline"})
    report = m.embed(ns)
    assert (report.namespace, report.embedder_id, report.remaining) == (ns, HASH_ID, 0)
    assert m.reindex(ns).embedded == 1
    assert m.embedder_id(ns) == HASH_ID


# -- errors ---------------------------------------------------------------------------


def test_errors_arrive_as_the_same_classes(m: Store, ns: str) -> None:
    m.upsert(ns, {"id": "a", "content": "x", "key": "k"})
    cases: list[tuple[Callable[[], Any], type[erstwhile.ErstwhileError], str]] = [
        (lambda: m.upsert(ns, {"id": "a", "content": "y", "if_version": 7}),
         erstwhile.VersionConflict, "erstwhile.write.version_conflict"),
        (lambda: m.upsert(ns, {"id": "b", "content": "y", "key": "k"}),
         erstwhile.WriteConflict, "erstwhile.write.conflict"),
        (lambda: m.get(ns, "missing"), erstwhile.NotFound, "erstwhile.not_found"),
        (lambda: m.upsert(ns, {"content": "y", "colour": "red"}),
         erstwhile.InvalidInput, "erstwhile.input.invalid"),
        (lambda: m.search(ns, "x", top_k=CAPS.max_top_k + 1),  # type: ignore[operator]
         erstwhile.PolicyLimit, "erstwhile.policy.limit"),
        (lambda: m.upsert(ns, [{"content": str(i)} for i in range(21)]),
         erstwhile.PolicyLimit, "erstwhile.policy.limit"),
        (lambda: m.expire(ns, action="invalidate", max_rows=101, all=True),
         erstwhile.PolicyLimit, "erstwhile.policy.limit"),
        (lambda: m.search("Bad Namespace", "x"), erstwhile.InvalidInput, "erstwhile.input.invalid"),
        (lambda: m.search(ns, "x", ranking="semantic", query_vector=[1.0]),
         erstwhile.InvalidInput, "erstwhile.input.invalid"),
        (lambda: m.set_embedding(ns, "a", [1.0, 2.0]), erstwhile.InvalidInput,
         "erstwhile.input.invalid"),
    ]  # fmt: skip
    for call, cls, code in cases:
        with pytest.raises(cls) as caught:
            call()
        assert caught.value.code == code
    assert m.get(ns, "a").content == "x"  # nothing was changed


# -- the same script, two stores, one transcript ----------------------------------------


def _record(record: erstwhile.Record) -> dict[str, Any]:
    data = record.to_json(include_vector=True)
    for instant in ("created_at", "updated_at", "deleted_at"):
        if instant in data:
            data[instant] = "<set>"
    return data


def _script(m: Store) -> list[Any]:
    """A session touching every method; returns what each step answered."""
    ns = "script"
    out: list[Any] = []

    def step(name: str, call: Callable[[], Any]) -> None:
        try:
            value = call()
        except erstwhile.ErstwhileError as error:
            out.append((name, "error", type(error).__name__, error.code, error.message))
            return
        if isinstance(value, erstwhile.Record):
            value = _record(value)
        elif isinstance(value, list) and value and isinstance(value[0], erstwhile.Record):
            value = [_record(r) for r in value]
        elif isinstance(value, erstwhile.SearchResult):
            value = value.to_json(include_vector=True)  # what a caller can rely on
            for hit in value["hits"]:
                for instant in ("created_at", "updated_at", "deleted_at"):
                    if instant in hit["record"]:
                        hit["record"][instant] = "<set>"
        elif isinstance(value, erstwhile.UpsertResult):
            value = value.model_dump()
        out.append((name, value))

    docs = [
        {"id": f"d{i}", "content": text, "valid_from": "2024-01-01", "metadata": {"n": str(i)}}
        for i, text in enumerate(
            ["the cat sat on the mat", "dogs chase cats", "a red car", "cars and trucks",
             "the cat owns a red car"]
        )
    ]  # fmt: skip
    step("upsert", lambda: m.upsert(ns, docs))
    step("add", lambda: m.add(ns, "a blue truck", id="d9", valid_from="2024-02-01"))
    step("get", lambda: m.get(ns, "d2"))
    step("lexical", lambda: m.search(ns, "cat car", ranking="lexical"))
    step("semantic", lambda: m.search(ns, "cat car", ranking="semantic", top_k=3))
    step("hybrid", lambda: m.search(ns, "red car", top_k=4))
    step(
        "where", lambda: m.search(ns, "cat", predicates=[{"key": "n", "op": "LT", "values": ["3"]}])
    )
    step("ids_only", lambda: m.search(ns, "car", ids_only=True))
    step("supersede", lambda: m.supersede(ns, "d2", {"id": "d2b", "content": "a red sports car",
                                                        "valid_from": "2024-03-01"}))  # fmt: skip
    step("history", lambda: m.history(ns, "d2b"))
    step("as_of", lambda: m.search(ns, "car", as_of="2024-02-15"))
    step("invalidate", lambda: m.invalidate(ns, "d1", at="2024-05-01"))
    step("verify", lambda: m.verify(ns, "d0", "ann"))
    step("delete", lambda: m.delete(ns, "d3"))
    step("historical", lambda: m.search(ns, "car", include_historical=True, top_k=10))
    step("expire", lambda: m.expire(ns, filter={"n": "4"}, action="invalidate", max_rows=10))
    step("hard", lambda: m.delete(ns, "d3", hard=True))
    step("gone", lambda: m.get(ns, "d3"))
    step("conflict", lambda: m.upsert(ns, {"id": "d0", "content": "x", "if_version": 1}))
    step("unknown field", lambda: m.upsert(ns, {"content": "x", "colour": 1}))
    step(
        "bad window",
        lambda: m.search(ns, "x", between={"from": "2024-02-01", "until": "2024-01-01"}),
    )
    step("over cap", lambda: m.search(ns, "x", top_k=51))
    step("bad namespace", lambda: m.get("Not A Namespace", "d0"))
    step("version 0", lambda: m.get(ns, "d0", version=0))
    step("empty old id", lambda: m.supersede(ns, "", {"content": "x"}))
    step("both queries", lambda: m.search(ns, "x", query_vector=[0.1] * 256))
    step("final", lambda: m.search(ns, "cat car truck", top_k=10))
    return out


def test_same_script_same_results(tmp_path: Path) -> None:
    with erstwhile.open(
        tmp_path / "embedded.db", embedder="hash", background_jobs=False, policy=CAPS
    ) as embedded:
        local = _script(embedded)
    server, secret = _serve(tmp_path)
    try:
        with erstwhile.Client(server.url, token=secret) as client:
            remote = _script(client)
    finally:
        server.stop()
    assert len(local) == len(remote)
    for expected, got in zip(local, remote, strict=True):
        assert got == expected
    errors = [step for step in local if step[1] == "error"]
    assert len(errors) == 9  # the script does exercise the error paths


def test_a_revision_inherits_what_it_does_not_set(m: Store, ns: str) -> None:
    """One rule, embedded and over REST: a revision keeps the old record's kind, tags,
    metadata and source unless it gives its own; the key moves to it."""
    old = m.upsert(
        ns,
        {"content": "v1", "kind": "fact", "tags": ["car"], "metadata": {"team": "core"},
         "source": "chat-7", "key": "user.car"},
    ).ids[0]  # fmt: skip
    kept = m.get(ns, m.supersede(ns, old, {"content": "v2"}).ids[0])
    assert (kept.kind, kept.tags, kept.metadata, kept.source, kept.key) == (
        "fact", ["car"], {"team": "core"}, "chat-7", "user.car",
    )  # fmt: skip
    changed = m.get(
        ns, m.supersede(ns, kept.id, {"content": "v3", "tags": [], "kind": "note"}).ids[0]
    )
    assert (changed.kind, changed.tags, changed.metadata) == ("note", [], {"team": "core"})


def test_expire_takes_the_search_scope_and_refuses_an_empty_one(m: Store, ns: str) -> None:
    m.upsert(ns, [
        {"id": "a", "content": "a", "kind": "log", "tags": ["x"]},
        {"id": "b", "content": "b", "kind": "note", "tags": ["x"], "key": "k.b"},
        {"id": "c", "content": "c", "kind": "note"},
    ])  # fmt: skip
    with pytest.raises(erstwhile.InvalidInput, match="all=true"):
        m.expire(ns, action="soft_delete", max_rows=10)
    assert all(m.get(ns, i).deleted_at is None for i in "abc")  # nothing changed
    assert m.expire(ns, kind="log", action="soft_delete", max_rows=10) == 1
    assert m.expire(ns, key="k.b", action="invalidate", max_rows=10) == 1
    assert m.get(ns, "a").deleted_at is not None and m.get(ns, "b").valid_to is not None
    assert m.expire(ns, tags=["x"], action="soft_delete", max_rows=10) == 1  # b; a is done
    assert m.get(ns, "c").deleted_at is None
    assert m.expire(ns, all=True, action="soft_delete", max_rows=10) == 1
    assert m.get(ns, "c").deleted_at is not None


def test_content_with_no_text_and_no_vector_is_refused(m: Store, ns: str) -> None:
    for content in ("", "  \n\t"):
        with pytest.raises(erstwhile.InvalidInput, match=r"records\[0\]\.content is empty"):
            m.upsert(ns, {"id": "empty", "content": content})
    with pytest.raises(erstwhile.NotFound):
        m.get(ns, "empty")


def test_a_version_of_an_unknown_record_is_reported_as_no_such_record(m: Store, ns: str) -> None:
    with pytest.raises(erstwhile.NotFound, match="does not exist"):
        m.get(ns, "nope", version=3)
    m.add(ns, "here", id="here")
    with pytest.raises(erstwhile.NotFound, match="has no version 3"):
        m.get(ns, "here", version=3)

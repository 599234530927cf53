"""The compatible API's own examples, through a real grpcio client against a real
``erstwhile serve``: upsert, search, supersede, expire by filter, delete then
``include_invalidated``, an ``if_version`` conflict, and History."""

from __future__ import annotations

import grpc
import pytest

from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc, error_code


def seed(rpc: Rpc, ns: str) -> pb.UpsertResponse:
    return rpc.Upsert(
        pb.UpsertRequest(
            namespace=ns,
            records=[
                pb.Record(id="a", content="apple pie recipe", metadata={"topic": "food"}),
                pb.Record(id="b", content="how to debug a Go panic", metadata={"topic": "code"}),
            ],
        )
    )


def ids(response: pb.SearchResponse) -> list[str]:
    return [hit.record.id for hit in response.hits]


def test_upsert_then_search(writer: Rpc, ns: str) -> None:
    written = seed(writer, ns)
    assert list(written.ids) == ["a", "b"] and list(written.versions) == [1, 1]
    assert list(written.warnings) == []

    found = writer.Search(pb.SearchRequest(namespace=ns, query_text="apple", top_k=2))
    assert ids(found) == ["a", "b"]
    assert found.mode == pb.SEARCH_MODE_DENSE  # unset mode is DENSE, as in the seed API
    assert all(-1.0 <= hit.score <= 1.0 for hit in found.hits)  # cosine
    assert found.hits[0].signals.semantic.rank == 1
    top = found.hits[0].record
    assert (top.content, dict(top.metadata), top.version, top.namespace) == (
        "apple pie recipe", {"topic": "food"}, 1, ns,
    )  # fmt: skip
    assert top.trust == pb.TRUST_UNVERIFIED and top.HasField("valid_from")
    assert not top.HasField("valid_to") and not top.HasField("deleted_at")
    assert top.payload == b"" and len(top.vector) == 0  # only when asked for

    lexical = writer.Search(
        pb.SearchRequest(namespace=ns, query_text="panic", mode=pb.SEARCH_MODE_SPARSE)
    )
    assert ids(lexical) == ["b"] and lexical.mode == pb.SEARCH_MODE_SPARSE
    assert lexical.hits[0].signals.lexical.rank == 1
    assert not lexical.hits[0].signals.HasField("semantic")

    only = writer.Search(pb.SearchRequest(namespace=ns, query_text="apple", ids_only=True))
    assert only.hits[0].record == pb.Record(id="a") and only.hits[0].score == found.hits[0].score


def test_supersede_invalidates_the_old_record(writer: Rpc, ns: str) -> None:
    seed(writer, ns)
    revised = writer.Upsert(
        pb.UpsertRequest(
            namespace=ns,
            records=[pb.Record(id="c", content="how to debug a Go race", supersedes=["b"])],
        )
    )
    assert list(revised.ids) == ["c"] and list(revised.versions) == [1]

    now = writer.Search(
        pb.SearchRequest(namespace=ns, query_text="debug Go", mode=pb.SEARCH_MODE_SPARSE)
    )
    assert ids(now) == ["c"]
    everything = writer.Search(
        pb.SearchRequest(
            namespace=ns, query_text="debug Go", mode=pb.SEARCH_MODE_SPARSE,
            include_invalidated=True,
        )
    )  # fmt: skip
    by_id = {hit.record.id: hit.record for hit in everything.hits}
    assert set(by_id) == {"b", "c"}
    assert by_id["b"].superseded_by == "c" and by_id["b"].version == 2
    assert by_id["b"].valid_to == by_id["c"].valid_from  # closed exactly where c begins
    assert list(by_id["c"].supersedes) == ["b"]

    history = writer.History(pb.HistoryRequest(namespace=ns, id="c"))
    assert [(r.id, r.version) for r in history.versions] == [("b", 2), ("c", 1)]


def test_expire_by_filter(writer: Rpc, ns: str) -> None:
    seed(writer, ns)
    expired = writer.Expire(
        pb.ExpireRequest(
            namespace=ns, filter={"topic": "food"},
            action=pb.EXPIRE_ACTION_SOFT_DELETE, max_rows=100,
        )
    )  # fmt: skip
    assert expired.affected == 1
    assert ids(writer.Search(pb.SearchRequest(namespace=ns, query_text="apple"))) == ["b"]
    by_tag = pb.ExpireRequest(namespace=ns, tags=["none-has-it"], kind="note",
                              action=pb.EXPIRE_ACTION_INVALIDATE, max_rows=100)  # fmt: skip
    assert writer.Expire(by_tag).affected == 0
    audit = writer.Search(
        pb.SearchRequest(namespace=ns, query_text="apple", include_invalidated=True)
    )
    tombstoned = {hit.record.id: hit.record.HasField("deleted_at") for hit in audit.hits}
    assert tombstoned == {"a": True, "b": False}

    # an empty scope is refused unless all is set (a forgotten filter expires nothing)
    with pytest.raises(grpc.RpcError) as unscoped:
        writer.Expire(pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE,
                                       max_rows=100))  # fmt: skip
    assert unscoped.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    invalidated = writer.Expire(
        pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE, max_rows=100, all=True)
    )
    assert invalidated.affected == 1  # every live record: b
    assert ids(writer.Search(pb.SearchRequest(namespace=ns, query_text="apple"))) == []


def test_delete_then_include_invalidated(admin: Rpc, ns: str) -> None:
    seed(admin, ns)
    admin.Delete(pb.DeleteRequest(namespace=ns, id="b"))
    assert ids(admin.Search(pb.SearchRequest(namespace=ns, query_text="apple"))) == ["a"]
    kept = admin.Search(
        pb.SearchRequest(namespace=ns, query_text="apple", include_invalidated=True)
    )
    assert ids(kept) == ["a", "b"] and kept.hits[1].record.HasField("deleted_at")

    # re-upserting a soft-deleted id resurrects it
    again = admin.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="b", content="Go")]))
    assert list(again.versions) == [3]
    assert ids(admin.Search(pb.SearchRequest(namespace=ns, query_text="Go"))) == ["b", "a"]

    admin.Delete(pb.DeleteRequest(namespace=ns, id="b", hard=True))
    gone = admin.Search(
        pb.SearchRequest(namespace=ns, query_text="apple", include_invalidated=True)
    )
    assert ids(gone) == ["a"]
    with pytest.raises(grpc.RpcError) as failed:
        admin.History(pb.HistoryRequest(namespace=ns, id="b"))
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_code(failed.value) == "erstwhile.not_found"


def test_if_version_conflict_changes_nothing(writer: Rpc, ns: str) -> None:
    seed(writer, ns)
    conditional = pb.Record(id="a", content="apple crumble recipe", if_version=1)
    assert list(writer.Upsert(pb.UpsertRequest(namespace=ns, records=[conditional])).versions) == [
        2
    ]

    stale = pb.UpsertRequest(
        namespace=ns,
        records=[
            pb.Record(id="c", content="new, must not exist", if_version=0),
            pb.Record(id="a", content="a stale write", if_version=1),
        ],
    )
    with pytest.raises(grpc.RpcError) as failed:
        writer.Upsert(stale)
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_code(failed.value) == "erstwhile.write.version_conflict"
    assert failed.value.details() == (
        "records[1].if_version is 1 but 'a' is at version 2; re-read it and retry"
    )
    # all or nothing: c was not written, a is unchanged
    history = writer.History(pb.HistoryRequest(namespace=ns, id="a"))
    assert [(r.version, r.content) for r in history.versions] == [(2, "apple crumble recipe")]
    with pytest.raises(grpc.RpcError) as missing:
        writer.History(pb.HistoryRequest(namespace=ns, id="c"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    fresh = pb.UpsertRequest(namespace=ns, records=[pb.Record(id="c", content="c", if_version=0)])
    assert list(writer.Upsert(fresh).versions) == [1]
    with pytest.raises(grpc.RpcError) as exists:
        writer.Upsert(fresh)
    assert exists.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_fields_round_trip(writer: Rpc, ns: str) -> None:
    """Every writable field comes back as written (microsecond instants, bytes, vector)."""
    record = pb.Record(
        id="full", content="a fully described memory", payload=b"\x00\xffraw",
        metadata={"priority": "3"}, source="chat:42", tags=["work", "home"], kind="Fact",
        key="user.full", origin=pb.Origin(source="notes", document="a.md", chunk=2),
    )  # fmt: skip
    record.valid_from.FromJsonString("2024-01-01T00:00:00.123456Z")
    record.valid_to.FromJsonString("2030-01-01T00:00:00Z")
    record.vector.extend([0.5, -0.25] + [0.0] * 254)
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[record]))
    found = writer.Search(
        pb.SearchRequest(
            namespace=ns, query_vector=[0.5, -0.25] + [0.0] * 254, include_payload=True,
            include_vector=True, predicates=[
                pb.FieldPredicate(key="priority", op=pb.PREDICATE_OP_GTE, values=["3"])
            ], tags=["work"], kind="fact", key="user.full",
        )
    )  # fmt: skip
    (hit,) = found.hits
    got = hit.record
    assert got.payload == b"\x00\xffraw" and got.source == "chat:42" and got.kind == "fact"
    assert list(got.tags) == ["work", "home"] and got.key == "user.full"
    assert got.valid_from.ToJsonString() == "2024-01-01T00:00:00.123456Z"
    assert got.valid_to.ToJsonString() == "2030-01-01T00:00:00Z"
    assert (got.origin.document, got.origin.chunk, got.origin.HasField("revision")) == (
        "a.md", 2, False,
    )  # fmt: skip
    # stored normalised, as the store keeps every vector
    assert list(got.vector)[:2] == pytest.approx([2 / 5**0.5, -1 / 5**0.5])
    assert hit.score == pytest.approx(1.0)

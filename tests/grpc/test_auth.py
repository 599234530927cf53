"""The auth matrix over gRPC: the REST tokens, capabilities and namespace scopes, sent
as ``x-erstwhile-capability: Bearer <token>``."""

from __future__ import annotations

import grpc
import pytest
from tests.server.harness import Server, run_cli

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc, Tokens, error_code


def calls(ns: str) -> dict[str, tuple[str, object]]:
    """One request per RPC, each valid for a caller allowed to make it."""
    return {
        "Search": ("Search", pb.SearchRequest(namespace=ns, query_text="x")),
        "History": ("History", pb.HistoryRequest(namespace=ns, id="seed")),
        "Upsert": ("Upsert", pb.UpsertRequest(namespace=ns, records=[pb.Record(content="x")])),
        "Expire": ("Expire", pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE,
                                              max_rows=1, filter={"none": "none"})),
        "Delete": ("Delete", pb.DeleteRequest(namespace=ns, id="seed")),
    }  # fmt: skip


def outcome(rpc: Rpc, method: str, request: object) -> str:
    try:
        getattr(rpc, method)(request)
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
        return str(error_code(error))
    return "ok"


@pytest.fixture
def seeded(admin: Rpc, ns: str) -> str:
    admin.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="seed", content="x")]))
    return ns


UNAUTH = "erstwhile.auth.unauthenticated"
FORBID = "erstwhile.auth.forbidden"


HOW = "send metadata 'x-erstwhile-capability: Bearer <token>'"


@pytest.mark.parametrize(
    ("metadata", "says"),
    [((), HOW), ((("x-erstwhile-capability", "Bearer mst_not-a-token"),), "not known"),
     ((("x-erstwhile-capability", "mst_no-scheme"),), HOW),
     ((("x-erstwhile-capability", "Bearer "),), HOW)],
    ids=["no-token", "unknown-token", "no-scheme", "empty"],
)  # fmt: skip
def test_no_or_bad_token_is_unauthenticated(
    channel: grpc.Channel, seeded: str, metadata: tuple[tuple[str, str], ...], says: str
) -> None:
    rpc = Rpc(channel, None)
    rpc.metadata = metadata
    for method, request in calls(seeded).values():
        assert outcome(rpc, method, request) == UNAUTH, method
    with pytest.raises(grpc.RpcError) as failed:
        rpc.Search(pb.SearchRequest(namespace=seeded, query_text="x"))
    assert says in (failed.value.details() or "")


def test_the_rest_header_is_not_the_grpc_one(
    channel: grpc.Channel, tokens: Tokens, seeded: str
) -> None:
    rpc = Rpc(channel, None)
    rpc.metadata = (("authorization", f"Bearer {tokens.admin}"),)
    assert outcome(rpc, "Search", calls(seeded)["Search"][1]) == UNAUTH


def test_read_only_reads_only(reader: Rpc, seeded: str) -> None:
    got = {name: outcome(reader, *call) for name, call in calls(seeded).items()}
    assert got == {"Search": "ok", "History": "ok", "Upsert": FORBID, "Expire": FORBID,
                   "Delete": FORBID}  # fmt: skip


def test_a_writer_writes_but_hard_delete_by_expire_is_admin(
    writer: Rpc, admin: Rpc, seeded: str
) -> None:
    got = {name: outcome(writer, *call) for name, call in calls(seeded).items()}
    assert set(got.values()) == {"ok"}
    hard = pb.ExpireRequest(
        namespace=seeded, action=pb.EXPIRE_ACTION_HARD_DELETE, max_rows=1, all=True
    )
    assert outcome(writer, "Expire", hard) == FORBID
    assert outcome(admin, "Expire", hard) == "ok"


def test_a_scoped_token_stays_in_its_namespace(
    channel: grpc.Channel, tokens: Tokens, admin: Rpc
) -> None:
    scoped = Rpc(channel, tokens.scoped)
    admin.Upsert(pb.UpsertRequest(namespace="scoped", records=[pb.Record(id="seed", content="x")]))
    inside = {name: outcome(scoped, *call) for name, call in calls("scoped").items()}
    assert set(inside.values()) == {"ok"}
    outside = {name: outcome(scoped, *call) for name, call in calls("elsewhere").items()}
    assert set(outside.values()) == {FORBID}


def test_a_disabled_token_is_refused_from_the_next_call(
    channel: grpc.Channel, server: Server, seeded: str
) -> None:
    token_id, secret = server.token(name="short-lived")
    rpc = Rpc(channel, secret)
    assert outcome(rpc, "Search", calls(seeded)["Search"][1]) == "ok"
    done = run_cli(server.db, "token", "disable", token_id)
    assert done.returncode == 0, done.stderr
    assert outcome(rpc, "Search", calls(seeded)["Search"][1]) == UNAUTH


def test_the_ledger_and_the_log_name_the_token(
    writer: Rpc, tokens: Tokens, server: Server, channel: grpc.Channel, ns: str
) -> None:
    assert outcome(Rpc(channel, None), "Search", calls(ns)["Search"][1]) == UNAUTH
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="w", content="x")]))
    writer.Delete(pb.DeleteRequest(namespace=ns, id="w"))
    with erstwhile.open(server.db, embedder="none", background_jobs=False) as m:
        entries = m.service.store.ledger(ns)
    assert [(e.op, e.actor) for e in entries][-1][1] == tokens.writer_id
    assert {e.actor for e in entries} == {tokens.writer_id}
    logged = server.wait_for_log(
        lambda e: e.get("msg") == "rpc" and e.get("actor") == tokens.writer_id
        and e.get("method", "").endswith("/Delete")
    )  # fmt: skip
    assert logged["outcome"] == "OK"
    refused = server.wait_for_log(
        lambda e: e.get("msg") == "rpc" and e.get("outcome") == "erstwhile.auth.unauthenticated"
    )
    assert refused["actor"] is None

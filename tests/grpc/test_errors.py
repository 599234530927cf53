"""Every SPEC §13 code over the wire: the gRPC status, the code in the trailing
metadata, the message naming the field. Each code an RPC can cause is caused for real:
on the served process, and storage going away under an in-process server. The one no
RPC can cause (a provider failure never fails a write or an AUTO search) is sent, with
every entry of the table, through the adapter's own error path on a real channel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from tests.server.harness import free_port
from tests.support.raw import spoil_sqlite_file

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc import semantic_pb2_grpc
from erstwhile.adapters.grpc.server import serving
from erstwhile.adapters.grpc.servicer import SemanticServicer
from erstwhile.adapters.grpc.status import STATUS_BY_CODE
from erstwhile.config import Settings
from erstwhile.domain.errors import ALL_ERRORS, ERRORS_BY_CODE, ErstwhileError
from erstwhile.memory import open_memory

from .conftest import Rpc, error_code

Status = grpc.StatusCode


def refused(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as failed:
        call()
    return failed.value


def check(error: grpc.RpcError, status: grpc.StatusCode, code: str, text: str) -> None:
    assert (error.code(), error_code(error)) == (status, code), error.details()
    assert text in (error.details() or "")


def test_input_invalid(writer: Rpc, ns: str) -> None:
    error = refused(lambda: writer.Search(pb.SearchRequest(namespace="Bad NS", query_text="x")))
    check(
        error, Status.INVALID_ARGUMENT, "erstwhile.input.invalid", "namespace 'Bad NS' is invalid"
    )

    both = pb.SearchRequest(namespace=ns, query_text="x", query_vector=[1.0])
    check(refused(lambda: writer.Search(both)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "give exactly one of query and query_vector")  # fmt: skip

    unset_op = pb.SearchRequest(
        namespace=ns, query_text="x", predicates=[pb.FieldPredicate(key="k", values=["1"])]
    )
    check(refused(lambda: writer.Search(unset_op)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "predicates[0].op is not set; use PREDICATE_OP_")  # fmt: skip

    not_a_number = pb.SearchRequest(
        namespace=ns, query_text="x",
        predicates=[pb.FieldPredicate(key="k", op=pb.PREDICATE_OP_GT, values=["high"])],
    )  # fmt: skip
    check(refused(lambda: writer.Search(not_a_number)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "'high' is not a number")  # fmt: skip

    reversed_validity = pb.Record(id="r", content="x")
    reversed_validity.valid_from.FromJsonString("2024-02-01T00:00:00Z")
    reversed_validity.valid_to.FromJsonString("2024-01-01T00:00:00Z")
    write = pb.UpsertRequest(namespace=ns, records=[pb.Record(content="ok"), reversed_validity])
    check(refused(lambda: writer.Upsert(write)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "records[1]: valid_to must be later")  # fmt: skip

    no_action = pb.ExpireRequest(namespace=ns, max_rows=5, all=True)
    check(refused(lambda: writer.Expire(no_action)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "action is required")  # fmt: skip
    unscoped = pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE, max_rows=5)
    check(refused(lambda: writer.Expire(unscoped)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "pass all=true")  # fmt: skip
    both = pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE, max_rows=5,
                            all=True, tags=["t"])  # fmt: skip
    check(refused(lambda: writer.Expire(both)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "all=true takes every record")  # fmt: skip
    no_max_rows = pb.ExpireRequest(namespace=ns, action=pb.EXPIRE_ACTION_INVALIDATE, all=True)
    check(refused(lambda: writer.Expire(no_max_rows)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "max_rows is required")  # fmt: skip
    unknown_mode = pb.SearchRequest(namespace=ns, query_text="x", mode=9)  # type: ignore[arg-type]
    check(refused(lambda: writer.Search(unknown_mode)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "mode 9 is not a known value")  # fmt: skip
    half_window = pb.SearchRequest(namespace=ns, query_text="x")
    half_window.between.until.FromJsonString("2024-01-01T00:00:00Z")
    check(refused(lambda: writer.Search(half_window)), Status.INVALID_ARGUMENT,
          "erstwhile.input.invalid", "from is missing")  # fmt: skip
    # nothing of the refused batch was written
    assert not writer.Search(pb.SearchRequest(namespace=ns, query_text="ok")).hits


def test_not_found(writer: Rpc, ns: str) -> None:
    check(refused(lambda: writer.History(pb.HistoryRequest(namespace=ns, id="nope"))),
          Status.NOT_FOUND, "erstwhile.not_found", "'nope'")  # fmt: skip
    check(refused(lambda: writer.Delete(pb.DeleteRequest(namespace=ns, id="nope"))),
          Status.NOT_FOUND, "erstwhile.not_found", "'nope'")  # fmt: skip


def test_write_conflict(writer: Rpc, ns: str) -> None:
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="a", content="x", key="k")]))
    taken = pb.UpsertRequest(namespace=ns, records=[pb.Record(id="b", content="y", key="k")])
    check(refused(lambda: writer.Upsert(taken)), Status.ABORTED,
          "erstwhile.write.conflict", "key 'k' is held by the current record 'a'")  # fmt: skip
    revise = pb.Record(id="c", content="z", supersedes=["a"])
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[revise]))
    fork = pb.UpsertRequest(
        namespace=ns, records=[pb.Record(id="d", content="w", supersedes=["a"])]
    )
    check(refused(lambda: writer.Upsert(fork)), Status.ABORTED,
          "erstwhile.write.conflict", "chains never fork")  # fmt: skip


def test_version_conflict(writer: Rpc, ns: str) -> None:
    stale = pb.UpsertRequest(namespace=ns, records=[pb.Record(id="a", content="x", if_version=3)])
    check(refused(lambda: writer.Upsert(stale)), Status.FAILED_PRECONDITION,
          "erstwhile.write.version_conflict", "'a' does not exist")  # fmt: skip


def test_policy_limit(admin: Rpc, ns: str) -> None:
    # the test server's caps: top_k 50, candidate_k 200, 20 records, 2000 bytes, max_rows 100
    over = [
        pb.SearchRequest(namespace=ns, query_text="x", top_k=51),
        pb.SearchRequest(
            namespace=ns, query_text="x", mode=pb.SEARCH_MODE_HYBRID, rerank_candidate_k=201
        ),
    ]
    for request in over:
        check(refused(lambda r=request: admin.Search(r)), Status.RESOURCE_EXHAUSTED,  # type: ignore[misc]
              "erstwhile.policy.limit", "over the configured limit")  # fmt: skip
    many = pb.UpsertRequest(namespace=ns, records=[pb.Record(content=str(i)) for i in range(21)])
    check(refused(lambda: admin.Upsert(many)), Status.RESOURCE_EXHAUSTED,
          "erstwhile.policy.limit", "policy.max_records_per_upsert")  # fmt: skip
    big = pb.UpsertRequest(namespace=ns, records=[pb.Record(content="x" * 2001)])
    check(refused(lambda: admin.Upsert(big)), Status.RESOURCE_EXHAUSTED,
          "erstwhile.policy.limit", "policy.max_content_bytes")  # fmt: skip
    rows = pb.ExpireRequest(
        namespace=ns, action=pb.EXPIRE_ACTION_HARD_DELETE, max_rows=101, all=True
    )
    check(refused(lambda: admin.Expire(rows)), Status.RESOURCE_EXHAUSTED,
          "erstwhile.policy.limit", "policy.max_max_rows")  # fmt: skip
    # a message over the body cap (64 KiB here) is refused by gRPC itself, as REST does
    huge = pb.UpsertRequest(namespace=ns, records=[pb.Record(content="x" * 70_000)])
    assert refused(lambda: admin.Upsert(huge)).code() == Status.RESOURCE_EXHAUSTED


def test_semantic_unavailable(writer: Rpc) -> None:
    dense = pb.SearchRequest(namespace="lexonly", query_text="anything")
    check(refused(lambda: writer.Search(dense)), Status.FAILED_PRECONDITION,
          "erstwhile.search.semantic_unavailable", "has no embedder configured")  # fmt: skip
    # AUTO keeps its promise differently: lexical, with a warning
    auto = writer.Search(pb.SearchRequest(namespace="lexonly", query_text="x",
                                          mode=pb.SEARCH_MODE_AUTO))  # fmt: skip
    assert auto.mode == pb.SEARCH_MODE_SPARSE
    assert auto.warnings[0].startswith("semantic_unavailable:")


def test_reindex_needed(writer: Rpc) -> None:
    written = writer.Upsert(
        pb.UpsertRequest(namespace="broken", records=[pb.Record(content="stored, no vector")])
    )
    assert written.warnings[0].startswith("embedding_failed:")  # the write did not fail
    complete = pb.SearchRequest(
        namespace="broken", query_vector=[1, 0, 0, 0], require_complete=True
    )
    check(refused(lambda: writer.Search(complete)), Status.FAILED_PRECONDITION,
          "erstwhile.search.reindex_needed", "have no vector")  # fmt: skip
    partial = writer.Search(pb.SearchRequest(namespace="broken", query_vector=[1, 0, 0, 0]))
    assert partial.unembedded >= 1 and partial.warnings[0].startswith("unembedded:")


def test_storage_unavailable(tmp_path: Path) -> None:
    """The database file stops being one under a running server (as in the REST test)."""
    path = tmp_path / "served.db"
    memory = erstwhile.open(path, embedder="hash", background_jobs=False)
    memory.add("ns", "written before")
    spoil_sqlite_file(memory, path)  # the next call opens the file anew
    settings = Settings.model_validate(
        {"auth": {"enabled": False}, "server": {"grpc_port": free_port()}}
    )
    try:
        with (
            serving(memory.service, settings) as port,
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            search = pb.SearchRequest(
                namespace="ns", query_text="written", mode=pb.SEARCH_MODE_SPARSE
            )
            error = refused(lambda: Rpc(channel, None).Search(search))
    finally:
        memory.close()
    check(error, Status.UNAVAILABLE, "erstwhile.storage.unavailable", str(path))


# -- the whole table, over a real channel ---------------------------------------------


class _Raising(SemanticServicer):
    """The real servicer, whose History raises the erstwhile error named by the id."""

    def History(
        self, request: pb.HistoryRequest, context: grpc.ServicerContext
    ) -> pb.HistoryResponse:
        def call(_: object) -> pb.HistoryResponse:
            cls = ERRORS_BY_CODE.get(request.id)
            if cls is None:  # a code of the table without a class here yet
                cls = type("Coded", (ErstwhileError,), {"code": request.id})
            raise cls(f"raised {request.id}")

        return self._serve(context, "History", call)


@pytest.fixture(scope="module")
def raising(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rpc]:
    memory = open_memory(tmp_path_factory.mktemp("raising") / "m.db", embedder="none",
                         background_jobs=False)  # fmt: skip
    server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(2))
    semantic_pb2_grpc.add_SemanticServicer_to_server(_Raising(memory.service, auth=False), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield Rpc(channel, None)
    server.stop(None).wait()
    memory.close()


SPEC_13 = {  # the table of SPEC §13, written out again
    "erstwhile.input.invalid": Status.INVALID_ARGUMENT,
    "erstwhile.auth.unauthenticated": Status.UNAUTHENTICATED,
    "erstwhile.auth.forbidden": Status.PERMISSION_DENIED,
    "erstwhile.not_found": Status.NOT_FOUND,
    "erstwhile.write.conflict": Status.ABORTED,
    "erstwhile.write.version_conflict": Status.FAILED_PRECONDITION,
    "erstwhile.policy.limit": Status.RESOURCE_EXHAUSTED,
    "erstwhile.search.semantic_unavailable": Status.FAILED_PRECONDITION,
    "erstwhile.search.reindex_needed": Status.FAILED_PRECONDITION,
    "erstwhile.provider.failed": Status.UNAVAILABLE,
    "erstwhile.storage.unavailable": Status.UNAVAILABLE,
}


def test_the_table_is_spec_13_and_covers_every_error() -> None:
    assert STATUS_BY_CODE == SPEC_13
    assert {cls.code for cls in ALL_ERRORS} <= set(STATUS_BY_CODE)


@pytest.mark.parametrize("code", sorted(SPEC_13))
def test_every_code_over_the_wire(raising: Rpc, code: str) -> None:
    error = refused(lambda: raising.History(pb.HistoryRequest(namespace="n", id=code)))
    assert (error.code(), error_code(error), error.details()) == (
        SPEC_13[code],
        code,
        f"raised {code}",
    )


def test_an_unknown_code_is_internal(raising: Rpc) -> None:
    error = refused(lambda: raising.History(pb.HistoryRequest(namespace="n", id="erstwhile.new")))
    assert (error.code(), error_code(error)) == (Status.INTERNAL, "erstwhile.new")

"""gRPC under hostile input (issue #43, item 10): a message that echoes a long input
keeps its status and code (the details stay within gRPC's metadata limits), and a
token's capability is decided before the message is read, as REST decides it before
the body."""

from __future__ import annotations

import grpc
import pytest

from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc, error_code


def _failure(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()  # type: ignore[operator]
    return caught.value


@pytest.mark.parametrize(
    ("char", "size"),
    [(char, size) for char in ("n", "é", "𝄞") for size in (9_000, 12_000, 16_000, 20_000)
     if len(char.encode()) * size < 64_000],  # under the test server's message cap
)  # fmt: skip
def test_a_long_namespace_keeps_its_status_and_code(reader: Rpc, char: str, size: int) -> None:
    error = _failure(lambda: reader.Search(pb.SearchRequest(namespace=char * size, query_text="x")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert error_code(error) == "erstwhile.input.invalid"
    assert "namespace" in error.details() and f"{size:,} characters" in error.details()
    assert len(error.details().encode()) <= 1024


def test_a_long_namespace_outside_a_token_scope_is_forbidden(scoped: Rpc) -> None:
    error = _failure(
        lambda: scoped.Search(pb.SearchRequest(namespace="n" * 20_000, query_text="x"))
    )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error.details()
    assert error_code(error) == "erstwhile.auth.forbidden"


def test_too_many_tags_is_invalid_argument(writer: Rpc, ns: str) -> None:
    tags = [f"t{i}" for i in range(300)]
    upsert = pb.UpsertRequest(namespace=ns, records=[pb.Record(content="x", tags=tags)])
    error = _failure(lambda: writer.Upsert(upsert))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "records[0].tags" in error.details()
    search = pb.SearchRequest(namespace=ns, query_text="x", tags=tags)
    error = _failure(lambda: writer.Search(search))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert error_code(error) == "erstwhile.input.invalid"


# malformed calls, each refused by the domain when the caller may make it
BAD_UPSERT = pb.UpsertRequest(records=[pb.Record(content="x", tags=["t"] * 300)])
BAD_EXPIRE = pb.ExpireRequest(action=pb.EXPIRE_ACTION_HARD_DELETE, max_rows=1)  # no scope
BAD_SEARCH = pb.SearchRequest(query_text="x", tags=["t"] * 300)


@pytest.mark.parametrize(
    ("who", "method", "request_", "namespace"),
    [
        ("reader", "Upsert", BAD_UPSERT, "any"),  # lacks write
        ("writer", "Expire", BAD_EXPIRE, "any"),  # lacks admin (a hard delete)
        ("scoped", "Search", BAD_SEARCH, "elsewhere"),  # outside its namespaces
        ("scoped", "Upsert", BAD_UPSERT, "elsewhere"),
    ],
)
def test_auth_is_decided_before_the_message_is_read(
    request: pytest.FixtureRequest, who: str, method: str, request_: object, namespace: str
) -> None:
    rpc: Rpc = request.getfixturevalue(who)
    message = type(request_)()
    message.CopyFrom(request_)  # type: ignore[attr-defined]
    message.namespace = namespace  # type: ignore[attr-defined]
    error = _failure(lambda: getattr(rpc, method)(message))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (who, method, error.details())
    assert error_code(error) == "erstwhile.auth.forbidden"
    # the same message from a caller allowed to make it is bad input
    allowed: Rpc = request.getfixturevalue("admin")
    message.namespace = "any"  # type: ignore[attr-defined]
    error = _failure(lambda: getattr(allowed, method)(message))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, error.details())

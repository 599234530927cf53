"""What the client does with what the wire gives it, beyond the conformance suite."""

from __future__ import annotations

import httpx
import pytest

import erstwhile
from erstwhile.adapters.client import ServerUnreachable

from .harness import free_port


def client_answering(status: int, body: bytes, content_type: str) -> erstwhile.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    return erstwhile.Client("http://erstwhile.test", transport=httpx.MockTransport(handler))


def test_unreachable_server_is_a_erstwhile_error() -> None:
    client = erstwhile.Client(f"http://127.0.0.1:{free_port()}", token="t", timeout=5)
    with client, pytest.raises(ServerUnreachable) as caught:
        client.get("ns", "a")
    assert isinstance(caught.value, erstwhile.ErstwhileError)
    assert "cannot reach" in caught.value.message


def test_error_body_becomes_the_named_class() -> None:
    body = b'{"error": {"code": "erstwhile.auth.forbidden", "message": "no entry"}}'
    client = client_answering(403, body, "application/json")
    with client, pytest.raises(erstwhile.Forbidden, match="no entry"):
        client.search("ns", "x")


def test_unknown_code_and_non_json_errors_keep_what_they_say() -> None:
    body = b'{"error": {"code": "erstwhile.internal", "message": "see the log"}}'
    client = client_answering(500, body, "application/json")
    with client, pytest.raises(erstwhile.ErstwhileError) as caught:
        client.get("ns", "a")
    assert (caught.value.code, caught.value.message) == ("erstwhile.internal", "see the log")
    client = client_answering(502, b"Bad Gateway", "text/plain")
    with client, pytest.raises(erstwhile.ErstwhileError, match="HTTP 502 from the server"):
        client.get("ns", "a")


def test_arguments_are_checked_before_sending() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing should be sent")

    with erstwhile.Client("http://erstwhile.test", transport=httpx.MockTransport(refuse)) as c:
        with pytest.raises(erstwhile.InvalidInput, match="colour"):
            c.upsert("ns", {"content": "x", "colour": "red"})
        with pytest.raises(erstwhile.InvalidInput, match="query"):
            c.search("ns")
        with pytest.raises(erstwhile.InvalidInput, match="max_rows"):
            c.expire("ns", action="invalidate")

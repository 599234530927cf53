"""``erstwhile serve`` as an operator runs it: gRPC beside REST on one service, health
checking, reflection (what ``grpcurl`` uses: docs/grpc.md's commands are replayed here
through descriptors fetched from the server, without the proto), docs/grpc.md's Python
example, and a clean stop of both on SIGTERM."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from tests.server.harness import CLI, Server, free_port, run_cli, start_server, write_config

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc, Tokens

PAGE = Path(__file__).resolve().parents[2] / "docs" / "grpc.md"
SERVICE = "erstwhile.semantic.v1.Semantic"


def grpc_section() -> str:
    text = PAGE.read_text()
    start = text.index("## Calling it")
    return text[start : text.index("\n## ", start + 1)]


def grpcurl_commands() -> list[tuple[str, str, str]]:
    """(header, JSON body, method) of every grpcurl command in docs/grpc.md."""
    found = re.findall(
        r"grpcurl -plaintext -H \"([^\"]+)\" \\\n\s+-d '(.*?)' \\\n\s+\S+:7078 (\S+)",
        grpc_section(),
        re.S,
    )
    assert len(found) == 3, found
    return found


def test_health_checking(server: Server, channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE):
        answer = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as unknown:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_the_readme_grpcurl_commands_work_through_reflection_alone(
    channel: grpc.Channel, tokens: Tokens, ns: str
) -> None:
    """What grpcurl does: list services, fetch descriptors, read the -d JSON with the
    proto3 JSON mapping, call, print JSON. No compiled stub of ours is used."""
    database = ProtoReflectionDescriptorDatabase(channel)
    assert SERVICE in set(database.get_services())
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName(SERVICE)
    assert [m.name for m in service.methods] == ["Upsert", "Search", "Delete", "Expire", "History"]

    answers = []
    for header, body, path in grpcurl_commands():
        key, _, value = header.partition(": ")
        metadata = ((key.lower(), value.replace("$TOKEN", tokens.writer)),)
        method = service.methods_by_name[path.split("/")[1]]
        assert path.startswith(SERVICE + "/")
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        request = json_format.Parse(body.replace('"notes"', f'"{ns}"'), request_class())
        call = channel.unary_unary(
            f"/{path}", request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )  # fmt: skip
        answers.append(json_format.MessageToDict(call(request, metadata=metadata, timeout=30),
                                                 preserving_proto_field_name=True))  # fmt: skip
    upserted, searched, expired = answers
    assert upserted == {"ids": ["a", "b"], "versions": ["1", "1"]}  # uint64 is a JSON string
    assert [hit["record"]["id"] for hit in searched["hits"]] == ["a", "b"]
    assert searched["mode"] == "SEARCH_MODE_HYBRID"
    assert expired == {"affected": "1"}


def test_reflection_v1_answers_as_v1alpha_does(channel: grpc.Channel) -> None:
    """Tools that ask for grpc.reflection.v1 (the same messages) get the same answer."""
    answers = {}
    for version in ("v1alpha", "v1"):
        call = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        ask = reflection_pb2.ServerReflectionRequest
        requests = [ask(list_services=""), ask(file_containing_symbol=SERVICE)]
        answers[version] = list(call(iter(requests), timeout=30))
    listed = {s.name for s in answers["v1"][0].list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"} <= listed  # fmt: skip
    assert answers["v1"] == answers["v1alpha"]
    assert answers["v1"][1].file_descriptor_response.file_descriptor_proto


def test_the_docs_python_example_runs(server: Server, tokens: Tokens, ns: str) -> None:
    section = grpc_section()
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    code = blocks[0].replace("127.0.0.1:7078", server.grpc_target).replace('"notes"', f'"{ns}"')
    printed: list[tuple[object, ...]] = []
    exec(code, {"TOKEN": tokens.writer, "print": lambda *args: printed.append(args)})
    assert printed[0] == (["a"], [1])
    assert [hit_id for hit_id, _ in printed[1][0]] == ["a"]  # type: ignore[attr-defined]
    assert printed[2] == ("erstwhile.write.version_conflict",)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_stops_both_and_closes_the_service(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    running = start_server(db, write_config(tmp_path / "m.toml"), "--no-auth")
    grpc_port = int(running.grpc_target.rsplit(":", 1)[1])
    rest_port = int(running.url.rsplit(":", 1)[1])
    try:
        with grpc.insecure_channel(running.grpc_target) as channel:
            rpc = Rpc(channel, None)
            rpc.Upsert(pb.UpsertRequest(namespace="n", records=[pb.Record(id="x", content="hi")]))
        with running.http() as http:  # the same service answers REST
            assert http.get("/v1/namespaces/n/records/x").json()["content"] == "hi"
        assert listening(grpc_port) and listening(rest_port)
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=60) == -signal.SIGTERM  # ends as SIGTERM ends it
    finally:
        running.stop()
    running.wait_for_log(lambda entry: entry.get("msg") == "gRPC stopped")
    call = running.wait_for_log(lambda entry: entry.get("msg") == "rpc")
    assert (call["method"], call["outcome"], call["actor"]) == (
        "erstwhile.semantic.v1.Semantic/Upsert", "OK", "local",
    )  # fmt: skip
    assert call["duration_ms"] > 0
    assert not listening(grpc_port) and not listening(rest_port)
    with erstwhile.open(db, embedder="none", background_jobs=False) as m:  # local actor, no auth
        assert {entry.actor for entry in m.service.store.ledger("n")} == {"local"}


def test_grpc_port_zero_is_off_and_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "m.toml")
    off = start_server(tmp_path / "off.db", config, "--grpc-port", "0")
    try:
        assert "gRPC off" in "\n".join(off.lines)
        with off.http() as http:
            assert http.get("/healthz").status_code == 200
    finally:
        off.stop()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(tmp_path / "t.db", "serve", "--port", str(free_port()),
                       "--grpc-port", str(port), "--config", str(config))  # fmt: skip
    assert done.returncode == 2
    assert "erstwhile.input.invalid: server.grpc_port: cannot listen on 127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_config_file_names_the_grpc_port(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "m.toml", extra=f"\n[server]\ngrpc_port = {port}\n")
    process = subprocess.Popen(
        [*CLI, "--db", str(tmp_path / "c.db"), "serve", "--port", str(free_port()),
         "--config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            health = health_pb2_grpc.HealthStub(channel)
            answer = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        process.terminate()
        process.wait(timeout=60)

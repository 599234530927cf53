"""The gRPC server beside REST: the Semantic service (and its alias under the earlier
API's path, :mod:`.alias`), health checking and reflection.

:func:`serving` binds ``[server] host`` : ``grpc_port``, serves until the block ends,
then stops: health turns NOT_SERVING, new calls are refused, calls in flight get
:data:`GRACE_SECONDS` to finish. ``erstwhile serve`` runs it around uvicorn, on the
same :class:`~erstwhile.service.Service` as REST and MCP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from erstwhile.adapters.grpc._generated import semantic_pb2_grpc as pb_grpc
from erstwhile.adapters.grpc.alias import ALIAS_SERVICE, add_alias
from erstwhile.adapters.grpc.servicer import SERVICE as SERVICE_NAME
from erstwhile.adapters.grpc.servicer import SemanticServicer
from erstwhile.config import Settings
from erstwhile.domain.errors import InvalidInput
from erstwhile.service import Service

log = logging.getLogger("erstwhile.grpc")

# grpcio-reflection serves only v1alpha; v1 is the same protocol (the same messages
# under another package), served here by the same servicer for tools that ask for it.
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
GRACE_SECONDS = 5.0
WORKERS = 8  # calls run on threads, like REST's sync routes; the store is thread-safe


def build_server(
    service: Service, *, auth: bool, max_message_bytes: int, shared: bool = False
) -> tuple[grpc.Server, health.HealthServicer, ThreadPoolExecutor]:
    """A gRPC server (not bound, not started) serving ``service``; ``shared``: its port
    is shared with sibling worker processes (SO_REUSEPORT)."""
    executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="erstwhile-grpc")
    server = grpc.server(
        executor,
        options=[
            # the REST body cap, so one request may be as large on either wire
            ("grpc.max_receive_message_length", max_message_bytes),
            # a port in use is an error, not a shared listener, unless workers share it
            ("grpc.so_reuseport", 1 if shared else 0),
        ],
    )
    semantic = SemanticServicer(service, auth=auth)
    pb_grpc.add_SemanticServicer_to_server(semantic, server)
    add_alias(semantic, server)  # the earlier API's path, for its clients (alias.py)
    checks = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    _add_reflection(server, (SERVICE_NAME, ALIAS_SERVICE, health.SERVICE_NAME,
                             reflection.SERVICE_NAME, REFLECTION_V1))  # fmt: skip
    return server, checks, executor


def _add_reflection(server: grpc.Server, names: tuple[str, ...]) -> None:
    """Server reflection, v1alpha and v1, so grpcurl and its kin need no proto file."""
    servicer = reflection.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    info = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(REFLECTION_V1, {"ServerReflectionInfo": info}),)
    )


def address(host: str, port: int) -> str:
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


def port_unavailable(where: str) -> InvalidInput:
    """The error for a gRPC address this process cannot listen on."""
    return InvalidInput(
        f"server.grpc_port: cannot listen on {where} (in use, or not an address here); "
        "choose another with --grpc-port or [server] grpc_port (0 turns gRPC off)"
    )


@contextmanager
def serving(service: Service, settings: Settings, *, shared: bool = False) -> Iterator[int]:
    """Serves gRPC on the settings' host and ``grpc_port`` for the block; yields the port.
    ``shared``: worker processes listen on the same port (see cli/serving.py)."""
    port = settings.server.grpc_port
    assert port, "gRPC is off (server.grpc_port = 0)"
    server, checks, executor = build_server(
        service,
        auth=settings.auth.enabled,
        max_message_bytes=settings.policy.max_body_bytes,
        shared=shared,
    )
    where = address(settings.server.host, port)
    try:
        bound = server.add_insecure_port(where)
    except RuntimeError:
        bound = 0
    if not bound:
        executor.shutdown(wait=False)
        raise port_unavailable(where)
    server.start()
    for name in ("", SERVICE_NAME, ALIAS_SERVICE):
        checks.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("gRPC serving %s on %s", SERVICE_NAME, where)
    try:
        yield bound
    finally:
        checks.enter_graceful_shutdown()
        server.stop(GRACE_SECONDS).wait()
        executor.shutdown(wait=True)
        log.info("gRPC stopped")

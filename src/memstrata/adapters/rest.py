"""The REST adapter (SPEC §10): FastAPI routes over the one service, under ``/v1``.

Each route does three things: parse its JSON body once into a domain request
(:func:`~memstrata.adapters.rest_models.parse_body`), call the service through the
request's :class:`~memstrata.access.Caller` (which checks the token), and render the
domain answer with its own ``to_json``. Errors are the domain's, mapped to
``{"error": {"code", "message"}}`` with the status of SPEC §13; FastAPI's own
validation errors are ``400 memstrata.input.invalid`` too, never 422 (which means a
policy cap here).

``create_app(service, settings)`` serves a service the caller opened (tests, embedding
the API in another app); ``create_app(None, settings)`` opens one from the settings in
the app's lifespan, with background embed jobs, and closes it at shutdown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import make_asgi_app
from pydantic import AfterValidator
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memstrata.access import Caller
from memstrata.adapters.mcp import mcp_http_app
from memstrata.adapters.rest_models import (
    ERROR_RESPONSES,
    Audit,
    EmbeddingBody,
    ExpireResponse,
    Health,
    HistoryResponse,
    InvalidateBody,
    Job,
    JobBody,
    JobList,
    NamespaceList,
    UpsertBody,
    VerifyBody,
    VersionResponse,
    body_schema,
    job_json,
    parse_body,
    request_components,
)
from memstrata.adapters.rest_observe import Metrics, Observe
from memstrata.adapters.rest_paths import EncodedSlashes, decode_segment
from memstrata.config import Settings
from memstrata.config import open_memory as open_configured
from memstrata.domain.errors import MemstrataError, PolicyLimit
from memstrata.domain.records import MAX_ID_LENGTH, NAMESPACE_PATTERN, Record, UpsertResult
from memstrata.domain.search import ExpireRequest, SearchRequest, SearchResult
from memstrata.domain.time import to_us
from memstrata.domain.validation import field_path
from memstrata.service import Service

log = logging.getLogger("memstrata.rest")

API_DESCRIPTION = """Long-term memory for AI agents: records that know when they were true.

Every `/v1` route needs `Authorization: Bearer <token>` unless the server runs with
auth off (loopback only). Errors are `{"error": {"code", "message"}}`; the code is
stable, the message names the field and the fix."""


@dataclass
class Runtime:
    """What the routes share: the service, the settings and the metrics."""

    settings: Settings
    service: Service | None = None
    owns_service: bool = False
    metrics: Metrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = Metrics(lambda: self.service)

    def start(self) -> None:
        if self.service is None:
            self.service = open_configured(self.settings, background_jobs=True).service
            self.owns_service = True
        if self.settings.auth.enabled and not self.service.access.tokens():
            log.warning(
                "auth is on and no token exists yet: every /v1 request will get 401; "
                "create one with `memstrata token create`"
            )

    def stop(self) -> None:
        if self.owns_service and self.service is not None:
            self.service.close()
            self.service = None

    def require_service(self) -> Service:
        if self.service is None:
            raise RuntimeError("the memstrata app has not started (lifespan not run)")
        return self.service


def runtime(request: Request) -> Runtime:
    found: Runtime = request.app.state.memstrata
    return found


# -- dependencies ----------------------------------------------------------------

bearer = HTTPBearer(
    auto_error=False,
    description="A token from `memstrata token create`.",
)


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """Authenticates the request (unless auth is off) into the caller it acts as."""
    rt = runtime(request)
    service = rt.require_service()
    if not rt.settings.auth.enabled:
        request.state.actor = "local"
        return Caller(service, None)
    token = service.access.authenticate(credentials.credentials if credentials else None)
    request.state.actor = token.id
    return Caller(service, token)


async def body(request: Request) -> bytes:
    """The raw request body, refused past ``policy.max_body_bytes`` without reading on."""
    limit = runtime(request).settings.policy.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _body_too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _body_too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _body_too_large(size: int, limit: int) -> PolicyLimit:
    return PolicyLimit(
        f"the request body is {size} bytes or more, over the limit of {limit} "
        "(policy.max_body_bytes); send less per request"
    )


# Path and query constraints are published in the schema but checked by the domain,
# so a bad namespace or version gets the same message here as in the Python API.
CallerDep = Annotated[Caller, Depends(caller)]
Body = Annotated[bytes, Depends(body)]
Namespace = Annotated[
    str,
    Path(
        description="Namespace: 1-63 of a-z, 0-9, '_' and '-', starting with a letter or digit",
        json_schema_extra={"pattern": NAMESPACE_PATTERN.pattern},
        examples=["default"],
    ),
]
RecordId = Annotated[
    str,
    AfterValidator(decode_segment),
    Path(
        alias="id",
        description="Record id, percent-encoded as one path segment ('/' as %2F)",
        json_schema_extra={"minLength": 1, "maxLength": MAX_ID_LENGTH},
        examples=["example-1"],
    ),
]


def reply(data: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status_code)


# -- errors ----------------------------------------------------------------------


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


async def on_memstrata_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, MemstrataError)
    headers = {"WWW-Authenticate": "Bearer"} if error.http_status == 401 else None
    return error_response(error.http_status, error.code, error.message, headers)


async def on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    messages = []
    for problem in list(error.errors())[:5]:
        path = field_path(tuple(problem.get("loc", ())))
        text = str(problem.get("msg", "is invalid")).removeprefix("Value error, ")
        messages.append(f"{path}: {text}")
    return error_response(400, "memstrata.input.invalid", "; ".join(messages) or "invalid request")


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 404:
        return error_response(
            404, "memstrata.not_found", f"no route {request.url.path}; see /openapi.json"
        )
    if error.status_code == 405:
        return error_response(
            405,
            "memstrata.input.invalid",
            f"method {request.method} is not allowed on {request.url.path}",
            dict(error.headers or {}),
        )
    return error_response(error.status_code, "memstrata.input.invalid", str(error.detail))


async def on_crash(request: Request, error: Exception) -> Response:
    log.error("unhandled error", exc_info=error)
    return error_response(
        500, "memstrata.internal", "internal error; the server log has the details"
    )


# -- routes ----------------------------------------------------------------------


def add_routes(app: FastAPI) -> None:
    records = "records"
    ops = "operations"

    @app.post(
        "/v1/namespaces/{ns}/records",
        response_model=UpsertResult,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(UpsertBody),
        tags=[records],
        summary="Write records (atomic upsert)",
    )
    def upsert(ns: Namespace, raw: Body, who: CallerDep) -> Response:
        request = parse_body(UpsertBody, raw)
        return reply(who.upsert(ns, request.records).model_dump(mode="json"))

    @app.get(
        "/v1/namespaces/{ns}/records/{id}",
        response_model=Record,
        responses=ERROR_RESPONSES,
        tags=[records],
        summary="Read a record, or one of its versions",
    )
    def get_record(
        ns: Namespace,
        record_id: RecordId,
        who: CallerDep,
        version: Annotated[
            int | None,
            Query(description="An earlier version", json_schema_extra={"minimum": 1}),
        ] = None,
    ) -> Response:
        return reply(who.get(ns, record_id, version).to_json())

    @app.delete(
        "/v1/namespaces/{ns}/records/{id}",
        status_code=204,
        response_class=Response,
        responses=ERROR_RESPONSES,
        tags=[records],
        summary="Soft delete (tombstone), or hard delete every trace",
    )
    def delete_record(
        ns: Namespace,
        record_id: RecordId,
        who: CallerDep,
        hard: Annotated[bool, Query(description="Remove every trace")] = False,
    ) -> Response:
        who.delete(ns, record_id, hard=hard)
        return Response(status_code=204)

    @app.post(
        "/v1/namespaces/{ns}/records/{id}/invalidate",
        response_model=VersionResponse,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(InvalidateBody, required=False),
        tags=[records],
        summary="Close a record's validity without a replacement",
    )
    def invalidate(ns: Namespace, record_id: RecordId, raw: Body, who: CallerDep) -> Response:
        request = parse_body(InvalidateBody, raw, optional=True)
        at = None if request.at is None else to_us(request.at)
        return reply({"version": who.invalidate(ns, record_id, at)})

    @app.post(
        "/v1/namespaces/{ns}/records/{id}/verify",
        response_model=VersionResponse,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(VerifyBody),
        tags=[records],
        summary="Promote a record to verified (admin)",
    )
    def verify(ns: Namespace, record_id: RecordId, raw: Body, who: CallerDep) -> Response:
        request = parse_body(VerifyBody, raw)
        return reply({"version": who.verify(ns, record_id, request.reviewer)})

    @app.put(
        "/v1/namespaces/{ns}/records/{id}/embedding",
        status_code=204,
        response_class=Response,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(EmbeddingBody),
        tags=[records],
        summary="Store a caller-computed vector for a record",
    )
    def set_embedding(ns: Namespace, record_id: RecordId, raw: Body, who: CallerDep) -> Response:
        request = parse_body(EmbeddingBody, raw)
        who.set_embedding(ns, record_id, request.vector)
        return Response(status_code=204)

    @app.get(
        "/v1/namespaces/{ns}/records/{id}/history",
        response_model=HistoryResponse,
        responses=ERROR_RESPONSES,
        tags=[records],
        summary="Every version of the knowledge, oldest first",
    )
    def history(ns: Namespace, record_id: RecordId, who: CallerDep) -> Response:
        return reply({"versions": [r.to_json() for r in who.history(ns, record_id)]})

    @app.post(
        "/v1/namespaces/{ns}/search",
        response_model=SearchResult,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(SearchRequest),
        tags=[records],
        summary="Search: lexical, semantic or hybrid, scoped in time",
    )
    def search(ns: Namespace, raw: Body, who: CallerDep, http: Request) -> Response:
        request = parse_body(SearchRequest, raw)
        started = time.perf_counter()
        result = who.search(ns, request)
        metrics = runtime(http).metrics
        metrics.search.labels(result.ranking.value).observe(time.perf_counter() - started)
        return reply(result.to_json(include_vector=request.include_vector))

    @app.post(
        "/v1/namespaces/{ns}/expire",
        response_model=ExpireResponse,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(ExpireRequest),
        tags=[records],
        summary="Invalidate or delete up to max_rows matching records",
    )
    def expire(ns: Namespace, raw: Body, who: CallerDep) -> Response:
        request = parse_body(ExpireRequest, raw)
        return reply({"affected": who.expire(ns, request)})

    @app.get(
        "/v1/namespaces",
        response_model=NamespaceList,
        responses=ERROR_RESPONSES,
        tags=[ops],
        summary="The namespaces this token may see",
    )
    def namespaces(who: CallerDep) -> Response:
        describe = who.service.embedders.describe
        return reply(
            {"namespaces": [{"name": ns, "embedder": describe(ns)} for ns in who.namespaces()]}
        )

    @app.get(
        "/v1/namespaces/{ns}/audit",
        response_model=Audit,
        responses=ERROR_RESPONSES,
        tags=[ops],
        summary="A namespace's embedder, vector backlog and recent jobs",
    )
    def audit(ns: Namespace, who: CallerDep) -> Response:
        found = who.audit(ns)
        return reply({**found, "jobs": [job_json(job) for job in found["jobs"]]})

    @app.post(
        "/v1/jobs",
        status_code=202,
        response_model=Job,
        responses=ERROR_RESPONSES,
        openapi_extra=body_schema(JobBody),
        tags=[ops],
        summary="Start an embed or reindex job (admin)",
    )
    def start_job(raw: Body, who: CallerDep) -> Response:
        request = parse_body(JobBody, raw)
        return reply(job_json(who.start_job(request.type, request.namespace)), 202)

    @app.get(
        "/v1/jobs/{job_id}",
        response_model=Job,
        responses=ERROR_RESPONSES,
        tags=[ops],
        summary="One job (admin)",
    )
    def get_job(job_id: int, who: CallerDep) -> Response:
        return reply(job_json(who.job(job_id)))

    @app.get(
        "/v1/jobs",
        response_model=JobList,
        responses=ERROR_RESPONSES,
        tags=[ops],
        summary="Jobs, oldest first (admin)",
    )
    def list_jobs(
        who: CallerDep,
        namespace: Annotated[
            str | None, Query(pattern=NAMESPACE_PATTERN.pattern, description="Only this one")
        ] = None,
    ) -> Response:
        return reply({"jobs": [job_json(job) for job in who.jobs(namespace)]})

    @app.get("/healthz", response_model=Health, tags=[ops], summary="Liveness")
    def healthz() -> Response:
        return reply({"status": "ok"})


class MetricsApp:
    """``prometheus_client``'s ASGI app behind the server's tokens: with auth on, any
    enabled token may scrape (the samples name namespaces). Being a class instance,
    Starlette's ``Route`` mounts it as an ASGI app rather than a view function."""

    def __init__(self, app: ASGIApp, rt: Runtime) -> None:
        self.app = app
        self.rt = rt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.rt.settings.auth.enabled:
            header = Headers(scope=scope).get("authorization", "")
            scheme, _, secret = header.partition(" ")
            try:
                self.rt.require_service().access.authenticate(
                    secret.strip() if scheme.lower() == "bearer" else None
                )
            except MemstrataError as error:
                response = await on_memstrata_error(Request(scope), error)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _package_version() -> str:
    try:
        return version("memstrata")
    except PackageNotFoundError:
        return "0"


def create_app(service: Service | None, settings: Settings) -> FastAPI:
    """The memstrata REST app over ``service`` (or one opened from ``settings``)."""
    rt = Runtime(settings=settings, service=service)
    mcp = mcp_http_app(host=settings.server.host)  # MCP at /mcp, behind the same tokens

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            rt.start()
        except MemstrataError as error:
            log.error("cannot start: %s: %s", error.code, error.message)
            raise
        try:
            async with mcp.running(rt.require_service(), auth=settings.auth.enabled):
                yield
        finally:
            rt.stop()

    app = FastAPI(
        title="memstrata",
        version=_package_version(),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.memstrata = rt
    app.add_exception_handler(MemstrataError, on_memstrata_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_crash)
    add_routes(app)
    app.router.routes.append(
        Route("/metrics", MetricsApp(make_asgi_app(rt.metrics.registry), rt), methods=["GET"])
    )
    app.router.routes.append(Route("/mcp", mcp))
    app.add_middleware(EncodedSlashes)
    app.add_middleware(Observe, metrics=rt.metrics)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=[
                    {"name": "records", "description": "Write, read and search memories"},
                    {"name": "operations", "description": "Namespaces, jobs and health"},
                ],
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(request_components())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

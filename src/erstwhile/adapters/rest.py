"""The REST adapter (SPEC §10): the FastAPI app over the one service, under ``/v1``.

The routes are :mod:`erstwhile.adapters.rest_routes` (one router per resource).
Errors are the domain's, mapped to ``{"error": {"code", "message"}}`` with the
status of :data:`~erstwhile.adapters.rest_models.HTTP_STATUS`; FastAPI's own
validation errors are ``400 erstwhile.input.invalid`` too, never 422 (which means a
policy cap here).

``create_app(service, settings)`` serves a service the caller opened (tests, embedding
the API in another app); ``create_app(None, settings)`` opens one from the settings in
the app's lifespan, with background embed jobs, and closes it at shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from erstwhile.access import Caller
from erstwhile.adapters.mcp import mcp_http_app
from erstwhile.adapters.rest_graph import graph_router
from erstwhile.adapters.rest_models import http_status, request_components
from erstwhile.adapters.rest_observe import Observe, metrics_scope
from erstwhile.adapters.rest_paths import EncodedSlashes
from erstwhile.adapters.rest_routes import ROUTERS, Runtime
from erstwhile.adapters.rest_ui import mount_ui
from erstwhile.config import Settings
from erstwhile.domain.errors import ErstwhileError
from erstwhile.domain.validation import field_path
from erstwhile.service import Service

log = logging.getLogger("erstwhile.rest")

API_DESCRIPTION = """Long-term memory for AI agents: records that know when they were true.

Every `/v1` route needs `Authorization: Bearer <token>` unless the server runs with
auth off (loopback only). Errors are `{"error": {"code", "message"}}`; the code is
stable, the message names the field and the fix."""


# -- errors ----------------------------------------------------------------------


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


async def on_erstwhile_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ErstwhileError)
    status = http_status(error)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return error_response(status, error.code, error.message, headers)


async def on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    messages = []
    for problem in list(error.errors())[:5]:
        path = field_path(tuple(problem.get("loc", ())))
        text = str(problem.get("msg", "is invalid")).removeprefix("Value error, ")
        messages.append(f"{path}: {text}")
    return error_response(400, "erstwhile.input.invalid", "; ".join(messages) or "invalid request")


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 404:
        return error_response(
            404, "erstwhile.not_found", f"no route {request.url.path}; see /openapi.json"
        )
    if error.status_code == 405:
        return error_response(
            405,
            "erstwhile.input.invalid",
            f"method {request.method} is not allowed on {request.url.path}",
            dict(error.headers or {}),
        )
    return error_response(error.status_code, "erstwhile.input.invalid", str(error.detail))


async def on_crash(request: Request, error: Exception) -> Response:
    log.error("unhandled error", exc_info=error)
    return error_response(
        500, "erstwhile.internal", "internal error; the server log has the details"
    )


class MetricsApp:
    """The Prometheus exposition of the app's registry, behind the server's tokens: with
    auth on, any enabled token may scrape, and sees samples only of the namespaces it
    may read. The token lookup and the collectors (which read the store) run on a
    worker thread, never on the event loop. Being a class instance, Starlette's
    ``Route`` mounts it as an ASGI app rather than a view function."""

    def __init__(self, registry: CollectorRegistry, rt: Runtime) -> None:
        self.registry = registry
        self.rt = rt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        visible: Callable[[str], bool] | None = None
        if self.rt.settings.auth.enabled:
            scheme, _, secret = headers.get("authorization", "").partition(" ")
            service = self.rt.require_service()
            try:
                token = await anyio.to_thread.run_sync(
                    service.access.authenticate,
                    secret.strip() if scheme.lower() == "bearer" else None,
                )
            except ErstwhileError as error:
                response = await on_erstwhile_error(Request(scope), error)
                await response(scope, receive, send)
                return
            # the per-namespace samples name namespaces: a scoped token sees its own
            visible = Caller(service, token).visible
        body = await anyio.to_thread.run_sync(self._render, encoder, visible)
        await Response(body, media_type=content_type)(scope, receive, send)

    def _render(
        self, encoder: Callable[[CollectorRegistry], bytes], visible: Callable[[str], bool] | None
    ) -> bytes:
        scoped = metrics_scope.set(visible)
        try:
            return encoder(self.registry)
        finally:
            metrics_scope.reset(scoped)


def _package_version() -> str:
    try:
        return version("erstwhile")
    except PackageNotFoundError:
        return "0"


def create_app(service: Service | None, settings: Settings) -> FastAPI:
    """The erstwhile REST app over ``service`` (or one opened from ``settings``)."""
    rt = Runtime(settings=settings, service=service)
    # MCP at /mcp, behind the same tokens; sessionless when worker processes share the port
    mcp = mcp_http_app(host=settings.server.host, stateless=settings.server.workers > 1)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            rt.start()
        except ErstwhileError as error:
            log.error("cannot start: %s: %s", error.code, error.message)
            raise
        service = rt.require_service()
        # Sync routes and dependencies run on the loop's worker threads: cap how many
        # run at once (anyio's default limiter, per event loop, so per worker process).
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = settings.server.threads or service.store.request_threads
        try:
            async with mcp.running(service, auth=settings.auth.enabled):
                yield
        finally:
            rt.stop()

    app = FastAPI(
        title="erstwhile",
        version=_package_version(),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.erstwhile = rt
    app.add_exception_handler(ErstwhileError, on_erstwhile_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_crash)
    for router in (*ROUTERS, graph_router):
        app.include_router(router)
    app.router.routes.append(
        Route("/metrics", MetricsApp(rt.metrics.registry, rt), methods=["GET"])
    )
    app.router.routes.append(Route("/mcp", mcp))
    mount_ui(app)  # the web inspector: static pages over this API
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
                    {"name": "graph", "description": "Entities, relationships, mentions"},
                    {"name": "operations", "description": "Namespaces, jobs and health"},
                ],
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(request_components())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

"""What the server tells its operator: one JSON log line per request, Prometheus metrics.

Every request gets an id (the caller's ``X-Request-ID`` when it sends a sane one, else
a fresh one), echoed in the response header and attached to every log line written
while the request runs. Metrics live in a registry per app, served at ``/metrics``:

    erstwhile_http_requests_total{method, route, status}
    erstwhile_http_request_duration_seconds{method, route}
    erstwhile_search_duration_seconds{ranking}
    erstwhile_embedding_cache_hits_total, erstwhile_embedding_cache_misses_total
    erstwhile_job_backlog{namespace}
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from erstwhile.service import Service

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID = 128

request_id: ContextVar[str | None] = ContextVar("erstwhile_request_id", default=None)
#: While ``/metrics`` renders: which namespaces the scraping token may see (None: all).
metrics_scope: ContextVar[Callable[[str], bool] | None] = ContextVar(
    "erstwhile_metrics_scope", default=None
)

http_log = logging.getLogger("erstwhile.http")

# uvicorn's `color_message` repeats the message with terminal colour codes: not data.
_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}


class _OncePerServer(logging.Filter):
    """erstwhile runs two MCP session managers (read-only and full), and the SDK logs
    each one's start and stop; the MCP app logs the pair once instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("StreamableHTTP session manager ")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        current = request_id.get()
        if current is not None:
            data["request_id"] = current
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


JsonFormatter.converter = time.gmtime


def configure_logging(level: str = "info") -> None:
    """Structured logs to stderr, for erstwhile and uvicorn alike."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    sdk = logging.getLogger("mcp.server.streamable_http_manager")
    if not any(isinstance(f, _OncePerServer) for f in sdk.filters):
        sdk.addFilter(_OncePerServer())


def _clean_request_id(value: str | None) -> str:
    if value and len(value) <= MAX_REQUEST_ID and value.isascii() and value.isprintable():
        return value
    return uuid.uuid4().hex


class Metrics:
    """The app's Prometheus registry and the metrics the REST layer records."""

    def __init__(self, service: Callable[[], Service | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "erstwhile_http_requests",
            "HTTP requests served, by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "erstwhile_http_request_duration_seconds",
            "HTTP request latency, by route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.search = Histogram(
            "erstwhile_search_duration_seconds",
            "Search latency inside the service, by the ranking that answered.",
            ["ranking"],
            registry=self.registry,
        )
        self.registry.register(ServiceCollector(service))


class ServiceCollector(Collector):
    """Reads the embedding caches and the vector backlog at scrape time."""

    def __init__(self, service: Callable[[], Service | None]) -> None:
        self._service = service

    def describe(self) -> list[Metric]:
        return []  # the samples depend on the service; read them only when scraped

    def collect(self) -> Iterator[Metric]:
        service = self._service()
        if service is None:
            return
        caches = service.embedders.caches()
        yield CounterMetricFamily(
            "erstwhile_embedding_cache_hits",
            "Texts whose vector came from the embedding cache.",
            value=sum(cache.hits for cache in caches),
        )
        yield CounterMetricFamily(
            "erstwhile_embedding_cache_misses",
            "Texts the embedding provider had to embed.",
            value=sum(cache.misses for cache in caches),
        )
        backlog = GaugeMetricFamily(
            "erstwhile_job_backlog",
            "Records with no vector for their namespace's current embedder.",
            labels=["namespace"],
        )
        visible = metrics_scope.get()
        for namespace in service.namespaces():
            if visible is not None and not visible(namespace):
                continue
            backlog.add_metric([namespace], service.backlog(namespace))
        yield backlog


def route_of(scope: Scope) -> str:
    """The route template (``/v1/namespaces/{ns}/search``), never the raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class Observe:
    """ASGI middleware: request id, one log line and the HTTP metrics per request."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid = _clean_request_id(headers.get(b"x-request-id", b"").decode("latin-1"))
        token = request_id.set(rid)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, rid)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = route_of(scope)
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            if http_log.isEnabledFor(logging.INFO):  # the line's fields cost when unread
                http_log.info(
                    "request",
                    extra={
                        "method": method,
                        "path": scope["path"],
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                        "actor": scope.get("state", {}).get("actor"),
                    },
                )
            request_id.reset(token)

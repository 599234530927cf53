"""The REST routes, as module-level functions on one router per resource, and what
they depend on: the runtime (service, settings, metrics), the caller a token
authenticates as, and the body read under the size cap.

Each route does three things: parse its JSON body once into a domain request
(:func:`~erstwhile.adapters.rest_models.parse_body`), call the service through the
request's :class:`~erstwhile.access.Caller` (which checks the token), and render the
domain answer with its own ``to_json``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic_core
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator

from erstwhile.access import Caller
from erstwhile.adapters.rest_models import (
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
    LedgerResponse,
    NamespaceList,
    UpsertBody,
    VerifyBody,
    VersionResponse,
    body_schema,
    job_json,
    parse_body,
)
from erstwhile.adapters.rest_observe import Metrics
from erstwhile.adapters.rest_paths import decode_segment
from erstwhile.config import Settings
from erstwhile.config import open_memory as open_configured
from erstwhile.domain.auth import Capability
from erstwhile.domain.errors import InvalidInput, PolicyLimit
from erstwhile.domain.records import (
    MAX_ID_LENGTH,
    NAMESPACE_PATTERN,
    Record,
    UpsertResult,
    history_entry,
)
from erstwhile.domain.search import ExpireRequest, SearchRequest, SearchResult
from erstwhile.domain.time import parse_instant, to_us
from erstwhile.service import DEFAULT_CHANGES, Service

log = logging.getLogger("erstwhile.rest")

RECORDS = "records"
OPERATIONS = "operations"


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
                "create one with `erstwhile token create`"
            )

    def stop(self) -> None:
        if self.owns_service and self.service is not None:
            self.service.close()
            self.service = None

    def require_service(self) -> Service:
        if self.service is None:
            raise RuntimeError("the erstwhile app has not started (lifespan not run)")
        return self.service


def runtime(request: Request) -> Runtime:
    found: Runtime = request.app.state.erstwhile
    return found


# -- dependencies ----------------------------------------------------------------

bearer = HTTPBearer(
    auto_error=False,
    description="A token from `erstwhile token create`.",
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


class BodyFor:
    """Dependency: the raw request body of a route that needs ``capability``, read only
    once the caller is known to hold it (for the path's namespace). So a request with no
    token, or the wrong one, is answered 401/403 without the server taking its body,
    however large it claims to be."""

    def __init__(self, capability: Capability) -> None:
        self.capability = capability

    async def __call__(self, request: Request, who: CallerDep) -> bytes:
        who.require(self.capability, request.path_params.get("ns"))
        return await body(request)


ReadBody = Annotated[bytes, Depends(BodyFor(Capability.READ))]
WriteBody = Annotated[bytes, Depends(BodyFor(Capability.WRITE))]
AdminBody = Annotated[bytes, Depends(BodyFor(Capability.ADMIN))]
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


KnownAt = Annotated[
    str | None,
    Query(description="Record time travel: as erstwhile knew it at this instant"),
]

MinTrust = Annotated[
    str | None,
    Query(
        description="The trust view: 'verified' (only records an admin verified) or "
        "'unverified' (every record); default: the namespace's default view",
        json_schema_extra={"enum": ["unverified", "verified"]},
    ),
]


def _instant(value: str | None, field: str) -> int | None:
    return None if value is None else parse_instant(value, field)


class Reply(JSONResponse):
    """A JSON response encoded by pydantic-core: the same compact UTF-8 JSON values as
    Starlette's ``json.dumps`` (a search answer in a third of the time, 29 against 98 us
    here); a number may be spelled the other shortest way (``0.000032`` for
    ``3.2e-05``). Non-finite numbers, and what pydantic-core cannot encode, take
    ``json.dumps``'s path, which refuses them as it always did."""

    def render(self, content: Any) -> bytes:
        try:
            body = pydantic_core.to_json(content)
        except (pydantic_core.PydanticSerializationError, ValueError):
            return super().render(content)
        if b"NaN" in body or b"Infinity" in body:  # or in a string: json.dumps decides
            return super().render(content)
        return body


def reply(data: Any, status_code: int = 200) -> JSONResponse:
    return Reply(data, status_code=status_code)


# -- routes, one router per resource (in the order the schema lists them) -----------

records_router = APIRouter(tags=[RECORDS], responses=ERROR_RESPONSES)
search_router = APIRouter(tags=[RECORDS], responses=ERROR_RESPONSES)
namespaces_router = APIRouter(tags=[OPERATIONS], responses=ERROR_RESPONSES)
jobs_router = APIRouter(tags=[OPERATIONS], responses=ERROR_RESPONSES)
health_router = APIRouter(tags=[OPERATIONS])


@records_router.post(
    "/v1/namespaces/{ns}/records",
    response_model=UpsertResult,
    openapi_extra=body_schema(UpsertBody),
    summary="Write records (atomic upsert)",
)
def upsert(ns: Namespace, raw: WriteBody, who: CallerDep) -> Response:
    request = parse_body(UpsertBody, raw)
    return reply(who.upsert(ns, request.records).model_dump(mode="json"))


@records_router.get(
    "/v1/namespaces/{ns}/records/{id}",
    response_model=Record,
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
    known_at: KnownAt = None,
    min_trust: MinTrust = None,
) -> Response:
    record = who.get(ns, record_id, version, _instant(known_at, "known_at"), min_trust=min_trust)
    return reply(record.to_json())


@records_router.delete(
    "/v1/namespaces/{ns}/records/{id}",
    status_code=204,
    response_class=Response,
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


@records_router.post(
    "/v1/namespaces/{ns}/records/{id}/invalidate",
    response_model=VersionResponse,
    openapi_extra=body_schema(InvalidateBody, required=False),
    summary="Close a record's validity without a replacement",
)
def invalidate(ns: Namespace, record_id: RecordId, raw: WriteBody, who: CallerDep) -> Response:
    request = parse_body(InvalidateBody, raw, optional=True)
    at = None if request.at is None else to_us(request.at)
    return reply({"version": who.invalidate(ns, record_id, at)})


@records_router.post(
    "/v1/namespaces/{ns}/records/{id}/verify",
    response_model=VersionResponse,
    openapi_extra=body_schema(VerifyBody),
    summary="Promote a record to verified (admin)",
)
def verify(ns: Namespace, record_id: RecordId, raw: AdminBody, who: CallerDep) -> Response:
    request = parse_body(VerifyBody, raw)
    return reply({"version": who.verify(ns, record_id, request.reviewer)})


@records_router.put(
    "/v1/namespaces/{ns}/records/{id}/embedding",
    status_code=204,
    response_class=Response,
    openapi_extra=body_schema(EmbeddingBody),
    summary="Store a caller-computed vector for a record",
)
def set_embedding(ns: Namespace, record_id: RecordId, raw: WriteBody, who: CallerDep) -> Response:
    request = parse_body(EmbeddingBody, raw)
    who.set_embedding(ns, record_id, request.vector)
    return Response(status_code=204)


@records_router.get(
    "/v1/namespaces/{ns}/records/{id}/history",
    response_model=HistoryResponse,
    summary="Every version of the knowledge, oldest first",
)
def history(
    ns: Namespace,
    record_id: RecordId,
    who: CallerDep,
    known_at: KnownAt = None,
    versions: Annotated[
        bool, Query(description="Every stored version of each record of the chain")
    ] = False,
    min_trust: MinTrust = None,
) -> Response:
    chain = who.history(
        ns, record_id, _instant(known_at, "known_at"), versions=versions, min_trust=min_trust
    )
    return reply({"versions": [history_entry(r) for r in chain]})


@records_router.get(
    "/v1/namespaces/{ns}/changes",
    summary="What was recorded between two instants (record time), paginated",
)
def changes(
    ns: Namespace,
    who: CallerDep,
    since: Annotated[
        str | None, Query(description="Start (inclusive), required: RFC 3339 or YYYY-MM-DD")
    ] = None,
    until: Annotated[str | None, Query(description="End (exclusive); default now")] = None,
    after: Annotated[int | None, Query(description="`next` of the previous page")] = None,
    limit: Annotated[int, Query(description="Changes per page")] = DEFAULT_CHANGES,
) -> Response:
    who.require(Capability.READ, ns)  # before reading the query: a 403 says nothing of it
    if since is None:
        raise InvalidInput("since is required: the instant the period of record time starts")
    page = who.changes(
        ns, parse_instant(since, "since"), _instant(until, "until"), after=after, limit=limit
    )
    return reply(page.to_json())


@records_router.get(
    "/v1/namespaces/{ns}/records/{id}/ledger",
    response_model=LedgerResponse,
    summary="The ledger entries of a record id, oldest first",
)
def ledger(ns: Namespace, record_id: RecordId, who: CallerDep) -> Response:
    return reply({"entries": [entry.to_json() for entry in who.ledger(ns, record_id)]})


@search_router.post(
    "/v1/namespaces/{ns}/search",
    response_model=SearchResult,
    openapi_extra=body_schema(SearchRequest),
    summary="Search: lexical, semantic or hybrid, scoped in time",
)
def search(ns: Namespace, raw: ReadBody, who: CallerDep, http: Request) -> Response:
    request = parse_body(SearchRequest, raw)
    started = time.perf_counter()
    result = who.search(ns, request)
    metrics = runtime(http).metrics
    metrics.search.labels(result.ranking.value).observe(time.perf_counter() - started)
    return reply(result.to_json(include_vector=request.include_vector))


@search_router.post(
    "/v1/namespaces/{ns}/expire",
    response_model=ExpireResponse,
    openapi_extra=body_schema(ExpireRequest),
    summary="Invalidate or delete up to max_rows matching records",
)
def expire(ns: Namespace, raw: WriteBody, who: CallerDep) -> Response:
    request = parse_body(ExpireRequest, raw)
    return reply({"affected": who.expire(ns, request)})


@namespaces_router.get(
    "/v1/namespaces",
    response_model=NamespaceList,
    summary="The namespaces this token may see",
)
def namespaces(who: CallerDep) -> Response:
    describe = who.service.embedders.describe
    return reply(
        {"namespaces": [{"name": ns, "embedder": describe(ns)} for ns in who.namespaces()]}
    )


@namespaces_router.get(
    "/v1/namespaces/{ns}/audit",
    response_model=Audit,
    summary="A namespace's embedder, extractor, backlogs and recent jobs",
)
def audit(ns: Namespace, who: CallerDep) -> Response:
    found = who.audit(ns)
    return reply({**found, "jobs": [job_json(job) for job in found["jobs"]]})


@jobs_router.post(
    "/v1/jobs",
    status_code=202,
    response_model=Job,
    openapi_extra=body_schema(JobBody),
    summary="Start an embed, extract, reindex or mine job (admin)",
)
def start_job(raw: AdminBody, who: CallerDep, http: Request) -> Response:
    request = parse_body(JobBody, raw)
    who.require(Capability.ADMIN, request.namespace)  # before anything about the path
    mine = request.mine_request(runtime(http).settings.server.mine_roots)
    budget = request.budget()
    return reply(job_json(who.start_job(request.type, request.namespace, mine, budget)), 202)


@jobs_router.get(
    "/v1/jobs/{job_id}",
    response_model=Job,
    summary="One job (admin)",
)
def get_job(job_id: int, who: CallerDep) -> Response:
    return reply(job_json(who.job(job_id)))


@jobs_router.get(
    "/v1/jobs",
    response_model=JobList,
    summary="Jobs, oldest first (admin)",
)
def list_jobs(
    who: CallerDep,
    namespace: Annotated[
        str | None, Query(pattern=NAMESPACE_PATTERN.pattern, description="Only this one")
    ] = None,
) -> Response:
    return reply({"jobs": [job_json(job) for job in who.jobs(namespace)]})


@health_router.get("/healthz", response_model=Health, summary="Liveness")
def healthz() -> Response:
    return reply({"status": "ok"})


ROUTERS = (records_router, search_router, namespaces_router, jobs_router, health_router)

"""``erstwhile.Client``: the embedded API's methods, over a erstwhile server's REST API.

    m = erstwhile.Client("http://127.0.0.1:7077", token="mst_…")
    m.upsert("agent", [{"content": "The user drives a red car", "key": "user.car"}])
    m.search("agent", "car").hits

Same methods, arguments and return types as :class:`erstwhile.Memory`, so code moves
from embedded to server without change. Arguments are checked here exactly as the
embedded API checks them, then sent as JSON; the server's error body becomes the same
exception class with the same code. A server that cannot be reached at all is
:class:`ServerUnreachable` (a :class:`~erstwhile.ErstwhileError` that has no HTTP
status of its own).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from erstwhile.domain.errors import ERRORS_BY_CODE, ErstwhileError, ProviderFailed
from erstwhile.domain.graph import Entity, Mention, Relationship
from erstwhile.domain.ledger import ChangesPage
from erstwhile.domain.records import SERVER_FIELDS, Record, UpsertResult, superseding
from erstwhile.domain.search import SearchRequest, SearchResult
from erstwhile.domain.time import format_instant, parse_instant
from erstwhile.domain.validation import parse_model
from erstwhile.jobs.embed import JobReport, Progress
from erstwhile.jobs.extract import ExtractReport
from erstwhile.memory import RecordLike, expire_request, to_record
from erstwhile.service import DEFAULT_CHANGES
from erstwhile.service_graph import NameLike

DEFAULT_TIMEOUT = 60.0
JOB_POLL_SECONDS = (0.05, 1.0)  # first and longest wait between job polls


class ServerUnreachable(ErstwhileError):
    """The server could not be reached, or did not answer in time."""

    code = "erstwhile.client.unreachable"


class _History(BaseModel):
    versions: list[Record]


def _segment(value: str) -> str:
    return quote(value, safe="")


def _record_json(record: Record) -> dict[str, Any]:
    """The fields the caller set, as JSON (payload base64, instants RFC 3339), without
    the ones the server owns (a record read back and written again carries them)."""
    return record.model_dump(mode="json", exclude_unset=True, exclude=set(SERVER_FIELDS))


def _instant(value: Any, field: str) -> str | None:
    """An instant as the server reads it (checked here, so the error names the field)."""
    return None if value is None else format_instant(parse_instant(value, field))


class Client:
    """A memory store on a erstwhile server. Thread-safe (one pooled HTTP client)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json", "User-Agent": "erstwhile-client"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def close(self) -> None:
        self._http.close()

    # -- the wire ---------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, **params: Any) -> httpx.Response:
        query = {k: v for k, v in params.items() if v is not None}
        content = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            response = self._http.request(
                method, path, content=content, params=query or None, headers=headers
            )
        except httpx.TimeoutException as error:
            raise ServerUnreachable(f"{self.url} did not answer in time: {error}") from None
        except httpx.TransportError as error:
            raise ServerUnreachable(f"cannot reach {self.url}: {error}") from None
        if response.is_success:
            return response
        raise _error_from(response)

    def _records_path(self, namespace: str, record_id: str | None = None) -> str:
        path = f"/v1/namespaces/{_segment(namespace)}/records"
        return path if record_id is None else f"{path}/{_segment(record_id)}"

    # -- writes -----------------------------------------------------------------

    def upsert(self, namespace: str, records: Iterable[RecordLike] | RecordLike) -> UpsertResult:
        if isinstance(records, Record | Mapping):
            records = [records]
        parsed = [to_record(r, f"records[{i}]") for i, r in enumerate(records)]
        body = {"records": [_record_json(record) for record in parsed]}
        response = self._call("POST", self._records_path(namespace), body)
        return UpsertResult.model_validate_json(response.content)

    def add(self, namespace: str, content: str, **fields: Any) -> str:
        """Stores one record and returns its id."""
        return self.upsert(namespace, [{"content": content, **fields}]).ids[0]

    def supersede(self, namespace: str, old_id: str, record: RecordLike) -> UpsertResult:
        return self.upsert(namespace, [superseding(to_record(record, "record"), old_id)])

    def invalidate(self, namespace: str, id: str, at: Any = None) -> int:
        body = {} if at is None else {"at": format_instant(parse_instant(at, "at"))}
        response = self._call("POST", self._records_path(namespace, id) + "/invalidate", body)
        return int(response.json()["version"])

    def delete(self, namespace: str, id: str, hard: bool = False) -> None:
        self._call("DELETE", self._records_path(namespace, id), hard="true" if hard else None)

    def expire(
        self,
        namespace: str,
        filter: Mapping[str, Any] | None = None,
        predicates: list[Any] | None = None,
        action: str = "invalidate",
        max_rows: int | None = None,
        *,
        kind: str | None = None,
        tags: list[str] | None = None,
        key: str | None = None,
        all: bool = False,
    ) -> int:
        request = expire_request(
            filter, predicates, action, max_rows, kind=kind, tags=tags, key=key, all=all
        )
        response = self._call(
            "POST", f"/v1/namespaces/{_segment(namespace)}/expire", request.model_dump(mode="json")
        )
        return int(response.json()["affected"])

    def verify(self, namespace: str, id: str, reviewer: str) -> int:
        response = self._call(
            "POST", self._records_path(namespace, id) + "/verify", {"reviewer": reviewer}
        )
        return int(response.json()["version"])

    def set_embedding(self, namespace: str, id: str, vector: list[float]) -> None:
        self._call(
            "PUT", self._records_path(namespace, id) + "/embedding", {"vector": list(vector)}
        )

    # -- reads ------------------------------------------------------------------

    def search(self, namespace: str, query: str | None = None, **options: Any) -> SearchResult:
        if query is not None:
            options["query"] = query
        request = parse_model(SearchRequest, options)
        body = request.model_dump(mode="json", exclude_unset=True, by_alias=True)
        response = self._call("POST", f"/v1/namespaces/{_segment(namespace)}/search", body)
        result = SearchResult.model_validate_json(response.content)
        return result.model_copy(update={"ids_only": request.ids_only})

    def get(
        self,
        namespace: str,
        id: str,
        version: int | None = None,
        known_at: Any = None,
        *,
        min_trust: str | None = None,
    ) -> Record:
        response = self._call(
            "GET", self._records_path(namespace, id), version=version,
            known_at=_instant(known_at, "known_at"), min_trust=min_trust,
        )  # fmt: skip
        return Record.model_validate_json(response.content)

    def history(
        self,
        namespace: str,
        id: str,
        known_at: Any = None,
        *,
        versions: bool = False,
        min_trust: str | None = None,
    ) -> list[Record]:
        response = self._call(
            "GET", self._records_path(namespace, id) + "/history",
            known_at=_instant(known_at, "known_at"), versions="true" if versions else None,
            min_trust=min_trust,
        )  # fmt: skip
        return _History.model_validate_json(response.content).versions

    def changes(
        self,
        namespace: str,
        since: Any,
        until: Any = None,
        *,
        after: int | None = None,
        limit: int = DEFAULT_CHANGES,
    ) -> ChangesPage:
        response = self._call(
            "GET", f"/v1/namespaces/{_segment(namespace)}/changes",
            since=_instant(since, "since"), until=_instant(until, "until"),
            after=after, limit=limit,
        )  # fmt: skip
        return ChangesPage.from_json(response.json())

    # -- jobs and namespaces ------------------------------------------------------

    def embed(self, namespace: str, *, progress: Progress | None = None) -> JobReport:
        """Runs the embed job on the server and waits for it (admin)."""
        return self._run_job("embed", namespace, progress)

    def reindex(self, namespace: str, *, progress: Progress | None = None) -> JobReport:
        """Re-embeds the namespace on the server and waits for it (admin)."""
        return self._run_job("reindex", namespace, progress)

    def embedder_id(self, namespace: str) -> str:
        """The active embedder of a namespace (``provider:model:dimensions``) or "none"."""
        return str(self.audit(namespace)["embedder"])

    def namespaces(self) -> list[str]:
        """The namespaces this token may see."""
        response = self._call("GET", "/v1/namespaces")
        return [item["name"] for item in response.json()["namespaces"]]

    def audit(self, namespace: str) -> dict[str, Any]:
        """A namespace's embedder, vector backlog and latest jobs."""
        response = self._call("GET", f"/v1/namespaces/{_segment(namespace)}/audit")
        data: dict[str, Any] = response.json()
        return data

    # -- the knowledge graph --------------------------------------------------------

    def _ns(self, namespace: str) -> str:
        return f"/v1/namespaces/{_segment(namespace)}"

    def extract(
        self,
        namespace: str,
        *,
        progress: Progress | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
    ) -> ExtractReport:
        """Runs the extract job on the server, within a budget if given (each limit
        unset: the server's ``[extraction]`` one), and waits for it (admin)."""
        budget = {"max_calls": max_calls, "max_tokens": max_tokens}
        job = self._follow_job("extract", namespace, progress,
                               {k: v for k, v in budget.items() if v is not None})  # fmt: skip
        audit = self.audit(namespace)
        return ExtractReport(
            job["id"], namespace, audit["extractor"], job["done"], 0, audit["extraction_backlog"],
            job.get("usage"), job.get("stopped"),
        )  # fmt: skip

    def assert_fact(
        self,
        namespace: str,
        subject: NameLike,
        predicate: str,
        object: NameLike,
        valid_from: Any = None,
    ) -> Relationship:
        body: dict[str, Any] = {"subject": subject, "predicate": predicate, "object": object}
        if valid_from is not None:
            body["valid_from"] = format_instant(parse_instant(valid_from, "valid_from"))
        response = self._call("POST", self._ns(namespace) + "/facts", body)
        return Relationship.from_json(response.json())

    def mention(self, namespace: str, record_id: str, entities: list[NameLike]) -> list[Mention]:
        refs = [{"name": e} if isinstance(e, str) else dict(e) for e in entities]
        path = self._records_path(namespace, record_id) + "/mentions"
        response = self._call("POST", path, {"entities": refs})
        return [Mention.from_json(item) for item in response.json()["mentions"]]

    def entities(
        self, namespace: str, q: str | None = None, *, kind: str | None = None, limit: int = 100
    ) -> list[Entity]:
        response = self._call("GET", self._ns(namespace) + "/entities", q=q, kind=kind,
                              limit=limit)  # fmt: skip
        return [Entity.from_json(item) for item in response.json()["entities"]]

    def entity(self, namespace: str, entity_id: str) -> dict[str, Any]:
        response = self._call("GET", self._ns(namespace) + f"/entities/{_segment(entity_id)}")
        data: dict[str, Any] = response.json()
        return data

    def relationships(
        self, namespace: str, entity_id: str, *, include_expired: bool = False, as_of: Any = None
    ) -> list[Relationship]:
        at = None if as_of is None else format_instant(parse_instant(as_of, "as_of"))
        response = self._call(
            "GET", self._ns(namespace) + f"/entities/{_segment(entity_id)}/relationships",
            include_expired="true" if include_expired else None, as_of=at,
        )  # fmt: skip
        return [Relationship.from_json(item) for item in response.json()["relationships"]]

    def mentions(self, namespace: str, entity_id: str) -> list[Mention]:
        path = self._ns(namespace) + f"/entities/{_segment(entity_id)}/mentions"
        return [Mention.from_json(item) for item in self._call("GET", path).json()["mentions"]]

    def _follow_job(
        self,
        job_type: str,
        namespace: str,
        progress: Progress | None,
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Starts a job on the server (``options``: more fields of its request) and
        waits until it ends; its final row."""
        job: dict[str, Any] = self._call(
            "POST", "/v1/jobs", {"type": job_type, "namespace": namespace, **(options or {})}
        ).json()
        wait = JOB_POLL_SECONDS[0]
        while job["state"] == "running":
            time.sleep(wait)  # the server runs the job; the client only follows it
            wait = min(wait * 2, JOB_POLL_SECONDS[1])
            job = self._call("GET", f"/v1/jobs/{job['id']}").json()
            if progress is not None:
                progress(job["done"], job["done"])
        if job["state"] != "done":
            raise ProviderFailed(job.get("error") or f"{job_type} job {job['id']} {job['state']}")
        return job

    def _run_job(self, job_type: str, namespace: str, progress: Progress | None) -> JobReport:
        job = self._follow_job(job_type, namespace, progress)
        audit = self.audit(namespace)
        return JobReport(job["id"], namespace, audit["embedder"], job["done"], audit["backlog"])


def _error_from(response: httpx.Response) -> ErstwhileError:
    """The exception the server's error body names (same class, same code, same message)."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:200] or response.reason_phrase
        return ErstwhileError(f"HTTP {response.status_code} from the server: {text}")
    cls = ERRORS_BY_CODE.get(code)
    if cls is not None:
        return cls(message)
    unknown = ErstwhileError(message)
    unknown.code = code
    return unknown

"""The REST wire: request bodies, response shapes and the one JSON → domain conversion.

Request bodies are read as raw bytes and validated once with pydantic's JSON mode
(:func:`parse_body`), so ``payload`` arrives as base64 and every problem is one
:class:`InvalidInput` naming the field. Their schemas are published in the OpenAPI
document under ``…Input`` names (:func:`request_components`); responses are
documented by their own models, so the schema says what the server really sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import models_json_schema

from erstwhile.domain.errors import ErstwhileError, Forbidden, InvalidInput
from erstwhile.domain.records import NAMESPACE_PATTERN, Instant, Record, RecordInput
from erstwhile.domain.search import ExpireRequest, SearchRequest
from erstwhile.domain.validation import as_invalid_input, parse_model, quoted
from erstwhile.extraction.usage import MAX_CALLS, MAX_TOKENS, Budget
from erstwhile.jobs import job_json as job_json  # re-exported for the routes
from erstwhile.jobs.mining import MineRequest

M = TypeVar("M", bound=BaseModel)

INPUT_SUFFIX = "Input"

# -- request bodies ------------------------------------------------------------------


class UpsertBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[RecordInput] = Field(
        description="Records to write, atomically: all or none. The fields the server owns"
        " (trust, version, superseded_by, created_at, updated_at) are refused."
    )


class InvalidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    at: Instant | None = Field(default=None, description="When validity ends (default: now).")


class VerifyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reviewer: str = Field(min_length=1, description="Who verified the record.")


class EmbeddingBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vector: list[float] = Field(min_length=1, description="The namespace embedder's vector.")


class JobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["embed", "extract", "reindex", "mine"]
    namespace: str = Field(pattern=NAMESPACE_PATTERN.pattern)
    path: str | None = Field(
        default=None,
        description="mine: the absolute path of a folder on the server's machine.",
    )
    include: list[str] = Field(
        default_factory=list, description="mine: only files matching these gitignore patterns."
    )
    exclude: list[str] = Field(
        default_factory=list, description="mine: skip files matching these gitignore patterns."
    )
    source: str | None = Field(
        default=None, description="mine: origin.source of the records (default: the path)."
    )
    max_calls: int | None = Field(
        default=None, ge=1, le=MAX_CALLS, strict=True,
        description="extract: the most provider calls (records shown to it) this job makes"
        " (default: extraction.max_calls, else none).",
    )  # fmt: skip
    max_tokens: int | None = Field(
        default=None, ge=1, le=MAX_TOKENS, strict=True,
        description="extract: stop once the tokens the provider reports reach this"
        " (default: extraction.max_tokens, else none).",
    )  # fmt: skip

    def budget(self) -> Budget | None:
        """An extract job's own limits (None when neither is given)."""
        if self.max_calls is None and self.max_tokens is None:
            return None
        return Budget(max_calls=self.max_calls, max_tokens=self.max_tokens)

    def mine_request(self, roots: Sequence[str]) -> MineRequest | None:
        """What a mine job mines (``None`` when no mine field is given), refused unless
        the folder is under one of ``roots`` (the server's ``mine_roots``)."""
        if self.path is None:
            if self.include or self.exclude or self.source is not None:
                raise InvalidInput("path is required with include, exclude or source")
            return None
        folder = Path(self.path)
        if not folder.is_absolute():
            raise InvalidInput(
                f"path {quoted(self.path)} must be absolute: the folder is read on the server's "
                "machine, from a working directory the client cannot know"
            )
        folder = folder.resolve()  # a symbolic link or '..' must not lead out of a root
        if not any(folder.is_relative_to(Path(root).expanduser().resolve()) for root in roots):
            allowed = ", ".join(roots) if roots else "none: the list is empty"
            raise Forbidden(
                f"path {quoted(self.path)} is not under a folder this server mines "
                f"(server.mine_roots: {allowed}); an operator can add it there"
            )
        fields = {"path": self.path, "include": self.include, "exclude": self.exclude,
                  "source": self.source}  # fmt: skip
        return parse_model(MineRequest, fields)


class EntityRef(BaseModel):
    """An entity named by a person: resolved like an extracted name."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="As the record spells it.")
    kind: str | None = Field(default=None, description="A free-form label (lower-cased).")
    aliases: list[str] = Field(default_factory=list, description="Other spellings of it.")

    def spec(self) -> dict[str, Any]:
        return self.model_dump(exclude_defaults=True)


class FactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str | EntityRef
    predicate: str = Field(min_length=1, description="A free-form label (lower-cased).")
    object: str | EntityRef
    valid_from: Instant | None = Field(default=None, description="Default: now.")


class MentionsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entities: list[EntityRef] = Field(min_length=1)


REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    UpsertBody,
    InvalidateBody,
    VerifyBody,
    EmbeddingBody,
    SearchRequest,
    ExpireRequest,
    JobBody,
    FactBody,
    MentionsBody,
)


def parse_body(model: type[M], raw: bytes, *, optional: bool = False) -> M:
    """The one conversion of a JSON body into a domain request."""
    if not raw.strip():
        if optional:
            return model()
        raise InvalidInput("the request body is empty; send a JSON object")
    try:
        # strict: JSON types as sent ("10" is not a number, 1 is not true); the domain's
        # own conversions (metadata values to text, instants) still apply
        return model.model_validate_json(raw, strict=True)
    except ValidationError as error:
        problem = error.errors()[0]
        if problem["type"] == "json_invalid":
            detail = problem.get("ctx", {}).get("error", problem["msg"])
            raise InvalidInput(f"the request body is not valid JSON: {detail}") from None
        raise as_invalid_input(error) from None


def request_components() -> dict[str, Any]:
    """JSON schemas of the request bodies (and what they use), named ``<Model>Input``."""
    _, schema = models_json_schema(
        [(model, "validation") for model in REQUEST_MODELS],
        ref_template="#/components/schemas/{model}" + INPUT_SUFFIX,
    )
    return {name + INPUT_SUFFIX: definition for name, definition in schema["$defs"].items()}


def body_schema(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a route whose body is ``model``."""
    ref = f"#/components/schemas/{model.__name__}{INPUT_SUFFIX}"
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": {"$ref": ref}}},
        }
    }


# -- responses ---------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable code, e.g. erstwhile.input.invalid.")
    message: str = Field(description="A diagnostic for people: names the field and the fix.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HistoryResponse(BaseModel):
    versions: list[Record]


class LedgerEntryOut(BaseModel):
    seq: int = Field(description="The entry's place in the ledger (increasing).")
    at: str = Field(description="When it was recorded.")
    op: str = Field(description="create, update, supersede, close, invalidate, delete, …")
    namespace: str
    record_id: str
    version: int | None = Field(default=None, description="The version it wrote, if any.")
    actor: str = Field(description="The token id that wrote it, or local.")
    detail: dict[str, Any] | None = None


class LedgerResponse(BaseModel):
    entries: list[LedgerEntryOut]


class VersionResponse(BaseModel):
    version: int


class ExpireResponse(BaseModel):
    affected: int


class JobUsage(BaseModel):
    calls: int = Field(description="Provider calls: records shown to it (retries apart).")
    retries: int = Field(description="Attempts made again after a transport or HTTP error.")
    failed: int = Field(description="Calls that failed (the provider gave up).")
    unreadable: int = Field(description="Answers not the JSON asked for: read as nothing found.")
    tokens_in: int | None = Field(
        description="Prompt tokens the provider reported; null: it reported none."
    )
    tokens_out: int | None = Field(
        description="Completion tokens the provider reported; null: it reported none."
    )
    provider_ms: float = Field(description="Time spent in the provider, retries included.")


class Job(BaseModel):
    id: int
    type: str
    namespace: str
    state: str = Field(
        description="running, done, failed, or interrupted (its process ended mid-way;"
        " the next job carries on where it stopped)"
    )
    done: int = Field(
        description="Records (embed, reindex, extract) or documents (mine) processed so far."
    )
    error: str | None = Field(
        default=None, description="Why it failed or stopped (absent otherwise)."
    )
    created_at: str
    updated_at: str
    owner: str | None = Field(default=None, description='The process running it, "host:pid".')
    usage: JobUsage | None = Field(
        default=None, description="extract: what its provider spent (absent for other jobs)."
    )
    stopped: str | None = Field(
        default=None,
        description="A done job that left records on purpose says why (its budget); the"
        " next extract job carries on. Absent otherwise.",
    )


class JobList(BaseModel):
    jobs: list[Job]


class NamespaceInfo(BaseModel):
    name: str
    embedder: str = Field(description="provider:model:dimensions, or none")


class NamespaceList(BaseModel):
    namespaces: list[NamespaceInfo]


class RecordCounts(BaseModel):
    """A namespace's records by state now; each record is in exactly one of current,
    future, superseded, invalidated and deleted, so those add up to ``records``."""

    records: int = Field(description="Every record id, soft-deleted ones included.")
    current: int = Field(description="Valid now and not deleted.")
    future: int = Field(description="Not yet valid: valid_from is after now (not deleted).")
    superseded: int = Field(description="Closed by a successor (not deleted).")
    invalidated: int = Field(description="Closed with no successor (not deleted).")
    deleted: int = Field(description="Soft-deleted (tombstones).")


class Audit(BaseModel):
    namespace: str
    embedder: str
    backlog: int = Field(description="Records with no vector for the current embedder.")
    records: RecordCounts
    extractor: str = Field(description="The extractor (provider[:model]), or none")
    extraction_backlog: int = Field(
        description="Current notes and mined records not yet read into the graph."
    )
    jobs: list[Job] = Field(description="The namespace's latest jobs, oldest first.")


class Health(BaseModel):
    status: Literal["ok"]


ERROR_STATUSES = {
    400: "Invalid input: malformed JSON, wrong types, unknown fields (erstwhile.input.invalid)",
    401: "No token, or an unknown or disabled one (erstwhile.auth.unauthenticated)",
    403: "The token lacks the capability or the namespace (erstwhile.auth.forbidden)",
    404: "No such record, version, namespace or job (erstwhile.not_found)",
    409: "A conflicting write or an unkeepable search promise "
    "(erstwhile.write.conflict, erstwhile.search.*)",
    412: "An if_version precondition failed (erstwhile.write.version_conflict)",
    422: "Over a policy cap, including the body size (erstwhile.policy.limit)",
    502: "An embedding provider failed (erstwhile.provider.failed)",
    503: "The database cannot be used (erstwhile.storage.unavailable)",
}

#: The HTTP status of each error code (SPEC §13), for REST and MCP over HTTP alike;
#: a code not listed is a server error.
HTTP_STATUS: dict[str, int] = {
    "erstwhile.input.invalid": 400,
    "erstwhile.auth.unauthenticated": 401,
    "erstwhile.auth.forbidden": 403,
    "erstwhile.not_found": 404,
    "erstwhile.write.conflict": 409,
    "erstwhile.write.version_conflict": 412,
    "erstwhile.policy.limit": 422,
    "erstwhile.search.semantic_unavailable": 409,
    "erstwhile.search.reindex_needed": 409,
    "erstwhile.provider.failed": 502,
    "erstwhile.storage.unavailable": 503,
    "erstwhile.client.unreachable": 503,
}


def http_status(error: ErstwhileError) -> int:
    """The HTTP status an error is answered with."""
    return HTTP_STATUS.get(error.code, 500)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text} for status, text in ERROR_STATUSES.items()
}

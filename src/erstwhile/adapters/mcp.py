"""The MCP adapter: erstwhile as an agent's memory over the Model Context Protocol.

Every import of the ``mcp`` SDK lives in this module. It offers six tools, each a
pydantic input model (the tool's JSON schema), one conversion into domain types, one
service call (through :class:`~erstwhile.access.Caller`) and a pydantic output model
(structured content)::

    search_memories   get_memory   memory_history        read tools (read_only_hint)
    add_memory        revise_memory   forget_memory      write tools

A read-only server lists and allows only the read tools. Failures are raised as
``ToolError("<code>: <message>")`` with the SPEC error code in front, so the client
sees ``isError`` and the model reads what to fix; the server keeps serving.

Transports: :func:`run_stdio` (``erstwhile mcp``) and :func:`mcp_http_app`, an ASGI app
for streamable HTTP that the REST server mounts at ``/mcp`` behind its tokens: a
read-only token reaches the read-only server, and every call goes through the token's
:class:`~erstwhile.access.Caller` (capabilities, namespaces, the ledger's actor).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic.fields import FieldInfo
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from erstwhile.access import Caller
from erstwhile.adapters.rest_models import http_status
from erstwhile.domain.auth import Capability, Token
from erstwhile.domain.errors import ErstwhileError, Forbidden, InvalidInput
from erstwhile.domain.records import Record
from erstwhile.domain.search import SearchRequest, SearchResult, between_option
from erstwhile.domain.validation import as_invalid_input, parse_model, quoted
from erstwhile.service import Service

DEFAULT_NAMESPACE = "default"
SERVER_NAME = "erstwhile"
log = logging.getLogger("erstwhile.mcp")

READ_TOOLS = ("search_memories", "get_memory", "memory_history")
WRITE_TOOLS = ("add_memory", "revise_memory", "forget_memory")

# The key under which the HTTP app hands the caller's token to the tools, in the ASGI
# scope of the request that carries the call. Only this module writes it.
TOKEN_SCOPE_KEY = "erstwhile.token"

INSTANT_HELP = "an RFC 3339 instant (2024-05-01T12:00:00Z, any offset) or a date YYYY-MM-DD"
NAMESPACE_HELP = "Memory space to use; omit it to use this server's default namespace."

# -- inputs --------------------------------------------------------------------------


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    namespace: str | None = Field(default=None, description=NAMESPACE_HELP)


class SearchMemoriesInput(_Input):
    query: str = Field(
        min_length=1, description="What to look for, in plain words (a question or keywords)."
    )
    top_k: int = Field(default=10, ge=1, description="How many memories to return at most.")
    ranking: Literal["auto", "lexical", "semantic", "hybrid"] = Field(
        default="auto",
        description="auto: keywords and meaning combined when possible; lexical: keywords "
        "only; semantic: meaning only; hybrid: both, or an error if meaning is unavailable.",
    )
    tags: list[str] = Field(
        default_factory=list, description="Only memories carrying every one of these tags."
    )
    kind: str | None = Field(
        default=None, description="Only memories of this kind (note, fact, decision, ...)."
    )
    filter: dict[str, str] = Field(
        default_factory=dict,
        description="Only memories whose metadata has exactly these key/value pairs.",
    )
    as_of: str | None = Field(
        default=None,
        description=f"Search what was true at this moment instead of now: {INSTANT_HELP}.",
    )
    from_: str | None = Field(
        default=None,
        alias="from",
        description="Start of a period (inclusive), given together with until: search what "
        f"was true at any time during [from, until) (the between window). {INSTANT_HELP}.",
    )
    until: str | None = Field(
        default=None,
        description=f"End of the period (exclusive), given together with from. {INSTANT_HELP}.",
    )
    include_historical: bool = Field(
        default=False,
        description="Search everything ever recorded: revised, expired, future and "
        "forgotten memories too.",
    )
    known_at: str | None = Field(
        default=None,
        description="Answer as memory would have answered at this moment of recording: "
        "only what had been recorded by then, each memory as it read then (before later "
        f"corrections). Combines with as_of, from/until and include_historical. {INSTANT_HELP}.",
    )
    expand: bool = Field(
        default=False,
        description="Also return memories related to the hits through the knowledge graph "
        "(the people, projects and tools they mention), after the hits, with 'via' saying how.",
    )
    min_trust: Literal["unverified", "verified"] | None = Field(
        default=None,
        description="verified: only memories a person verified; unverified: every memory. "
        "Default: the namespace's trust view (set by the operator).",
    )

    def to_request(self) -> SearchRequest:
        """The tool's arguments as the domain's search request: MCP's one conversion."""
        fields: dict[str, Any] = self.model_dump(
            exclude={"namespace", "from_", "until"}, exclude_none=True
        )
        between = between_option(self.from_, self.until)
        if between is not None:
            fields["between"] = between
        return parse_model(SearchRequest, fields)


class GetMemoryInput(_Input):
    id: str = Field(min_length=1, description="The memory's id.")
    version: int | None = Field(
        default=None, ge=1, description="An earlier version of this id (default: the latest)."
    )
    min_trust: Literal["unverified", "verified"] | None = Field(
        default=None,
        description="verified: only memories a person verified; unverified: every memory. "
        "Default: the namespace's trust view (set by the operator).",
    )


class MemoryHistoryInput(_Input):
    id: str = Field(min_length=1, description="The id of any memory in the revision chain.")
    versions: bool = Field(
        default=False,
        description="List every stored version of each memory, rewrites in place too,"
        " oldest first by when each was recorded.",
    )
    min_trust: Literal["unverified", "verified"] | None = Field(
        default=None,
        description="verified: only memories a person verified; unverified: every memory. "
        "Default: the namespace's trust view (set by the operator).",
    )


MetadataInput = dict[str, str | int | float | bool]


class AddMemoryInput(_Input):
    content: str = Field(
        min_length=1,
        description="The memory: one self-contained statement that makes sense on its own.",
    )
    tags: list[str] = Field(default_factory=list, description="Labels to find it by later.")
    kind: str | None = Field(
        default=None,
        description="What it is: note (default), fact, preference, decision, event, ...",
    )
    key: str | None = Field(
        default=None,
        description="Optional unique handle (e.g. user.car) for a fact that will be revised "
        "over time; no two current memories share a key.",
    )
    metadata: MetadataInput = Field(
        default_factory=dict,
        description="Extra key/value pairs (values are stored as text); a `session` or "
        "`conversation` key embeds the memory with the one before it in that conversation.",
    )
    valid_from: str | None = Field(
        default=None, description=f"When it became true (default: now); {INSTANT_HELP}."
    )
    source: str | None = Field(
        default=None, description="Where it came from (a conversation, document or URL)."
    )


class ReviseMemoryInput(_Input):
    id: str = Field(min_length=1, description="The id of the current memory to replace.")
    content: str = Field(min_length=1, description="The corrected or updated statement.")
    tags: list[str] | None = Field(
        default=None, description="New tags (default: keep the old memory's tags)."
    )
    kind: str | None = Field(default=None, description="New kind (default: keep the old one).")
    metadata: MetadataInput | None = Field(
        default=None, description="New metadata (default: keep the old memory's metadata)."
    )
    valid_from: str | None = Field(
        default=None,
        description=f"When the new content became true (default: now); {INSTANT_HELP}.",
    )
    source: str | None = Field(default=None, description="Provenance of the new content.")


class ForgetMemoryInput(_Input):
    id: str = Field(min_length=1, description="The id of the memory to forget.")


# -- outputs -------------------------------------------------------------------------


class _Output(BaseModel):
    """Structured content; optional fields that are unset are absent, not null."""

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class MemoryRecord(_Output):
    """One memory as stored. Times are RFC 3339 UTC."""

    model_config = ConfigDict(extra="ignore")

    id: str
    namespace: str
    content: str
    kind: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    key: str | None = None
    trust: Literal["unverified", "verified"]
    source: str | None = None
    origin: dict[str, str | int] | None = None
    valid_from: str = Field(description="When it became true.")
    valid_to: str | None = Field(default=None, description="When it stopped being true.")
    created_at: str = Field(description="When erstwhile recorded it.")
    updated_at: str = Field(description="When erstwhile recorded this version.")
    known_until: str | None = Field(
        default=None, description="When a later version replaced this one (null: current)."
    )
    deleted_at: str | None = Field(default=None, description="When it was forgotten.")
    supersedes: list[str] = Field(default_factory=list, description="Ids it replaced.")
    superseded_by: str | None = Field(default=None, description="Id of its replacement.")
    version: int

    @classmethod
    def of(cls, record: Record) -> MemoryRecord:
        return cls.model_validate(record.to_json())


class SearchHit(_Output):
    record: MemoryRecord
    score: float = Field(description="Relevance; comparable only within one response.")
    signals: dict[str, dict[str, float | int | str]] = Field(default_factory=dict)
    via: list[dict[str, str]] = Field(
        default_factory=list,
        description="For a memory the graph related: the entity (its id and name), the "
        "predicate and the edge that did.",
    )


class SearchMemoriesResult(_Output):
    hits: list[SearchHit]
    ranking: str = Field(description="The ranking actually used.")
    unembedded: int = Field(
        default=0, description="In-scope memories the meaning-based lane could not see yet."
    )
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, result: SearchResult) -> SearchMemoriesResult:
        return cls(
            hits=[
                SearchHit(
                    record=MemoryRecord.of(hit.record),
                    score=hit.score,
                    signals=hit.signals,
                    via=hit.via,
                )
                for hit in result.hits
            ],
            ranking=result.ranking.value,
            unembedded=result.unembedded,
            warnings=result.warnings,
        )


class MemoryHistoryResult(_Output):
    versions: list[MemoryRecord] = Field(description="The revision chain, oldest first.")


class WriteResult(_Output):
    id: str = Field(description="The id of the memory written.")
    version: int
    namespace: str
    replaced: str | None = Field(default=None, description="The id of the memory it replaced.")
    warnings: list[str] = Field(default_factory=list)


class ForgetResult(_Output):
    id: str
    namespace: str
    forgotten: bool = True


# -- the tools ---------------------------------------------------------------------


SEARCH_DESCRIPTION = """\
Search long-term memory for what was learned before: facts about the user and the \
world, preferences, decisions and their reasons, past events. Use it before answering \
anything that may depend on earlier conversations, and before adding a memory, to find \
one that should be revised instead.

Time: by default only memories true now are searched. as_of searches what was true at \
one moment ("what did we know on 2024-03-01?"). from and until (both, a half-open period \
[from, until)) search what was true at any time during that period. include_historical \
searches everything ever recorded, including revised, expired and forgotten memories. \
Use at most one of these. Each memory says when it was true (valid_from, valid_to) and \
when it was recorded (created_at). known_at puts the search back to a moment of \
recording ("what did memory say last Tuesday, before it was corrected?").

Narrow with tags (all must match), kind and filter (exact metadata values)."""

GET_DESCRIPTION = """\
Read one memory by id, exactly as stored, even if it was revised or forgotten. Use it \
to look closer at a memory a search returned; version reads an earlier version of \
the same id."""

HISTORY_DESCRIPTION = """\
Show how one piece of knowledge changed over time: every memory in its revision chain \
(the ones it replaced and the ones that replaced it), oldest first, each with when it \
was true. Use it when asked how or when something changed, or what was believed before."""

ADD_DESCRIPTION = """\
Save something worth remembering beyond this conversation: a fact, a preference, a \
decision and why, an event. Write one self-contained statement per memory, so it makes \
sense without this conversation. If a stored memory is now wrong or outdated, use \
revise_memory instead, so the old version stays in history.

valid_from is when it became true (default: now); give a past date for things that \
started earlier. key is an optional unique handle (e.g. user.car) for a fact that will \
be revised over time. Returns the new memory's id."""

REVISE_DESCRIPTION = """\
Replace a memory whose content is no longer right (something changed, or it was \
wrong) with new content. The old memory is not erased: it stays in history, true until \
the new one begins, so as_of searches still find it. The new memory takes over the old \
one's key and keeps its kind, tags, metadata and source unless new ones are given. \
valid_from is when the new content became true (default: now). Revise the current \
memory (find its id with search_memories); a memory already replaced cannot be \
replaced again."""

FORGET_DESCRIPTION = """\
Forget a memory that is wrong or must not be recalled any more: it stops appearing in \
searches. It is soft-deleted, not erased: get_memory, memory_history and \
include_historical searches still show it. To record that something changed, use \
revise_memory instead. Forgetting a forgotten memory changes nothing."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_model: type[_Input]
    output_model: type[_Output]
    annotations: ToolAnnotations

    @property
    def argument_names(self) -> frozenset[str]:
        return frozenset(
            field.alias or name for name, field in self.input_model.model_fields.items()
        )


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search_memories", "Search memories", SEARCH_DESCRIPTION, SearchMemoriesInput,
             SearchMemoriesResult, READ_ONLY),
    ToolSpec("get_memory", "Get a memory", GET_DESCRIPTION, GetMemoryInput, MemoryRecord,
             READ_ONLY),
    ToolSpec("memory_history", "Memory history", HISTORY_DESCRIPTION, MemoryHistoryInput,
             MemoryHistoryResult, READ_ONLY),
    # Each call stores a new memory: additive, not idempotent.
    ToolSpec("add_memory", "Add a memory", ADD_DESCRIPTION, AddMemoryInput, WriteResult,
             _writes(destructive=False, idempotent=False)),
    # Ends the old memory's validity and moves its key: an update, not only an addition
    # (nothing is erased). A repeat is refused (the old one is already replaced).
    ToolSpec("revise_memory", "Revise a memory", REVISE_DESCRIPTION, ReviseMemoryInput,
             WriteResult, _writes(destructive=True, idempotent=False)),
    # Hides the memory from recall; forgetting twice changes nothing the second time.
    ToolSpec("forget_memory", "Forget a memory", FORGET_DESCRIPTION, ForgetMemoryInput,
             ForgetResult, _writes(destructive=True, idempotent=True)),
)  # fmt: skip


class MemoryTools:
    """The tool bodies: one conversion into domain types, one call through the caller's
    :class:`~erstwhile.access.Caller` (which checks a token's capability and namespaces
    and ledgers its id), one output model."""

    def __init__(self, service: Service, namespace: str | None) -> None:
        self.service = service
        self.namespace = namespace

    def _caller(self, context: Context, namespace: str | None) -> tuple[Caller, str]:
        """Who is calling, and the namespace the call is about (:meth:`namespace_for`)."""
        token = caller_token(context)
        return Caller(self.service, token), self.namespace_for(namespace, token)

    def namespace_for(self, namespace: str | None, token: Token | None) -> str:
        """The namespace a call is about: the one given, else the server's, else the
        one namespace the caller's token is limited to, else default."""
        if namespace is None:
            namespace = self.namespace
        if namespace is None and token is not None and len(token.namespaces) == 1:
            (namespace,) = token.namespaces
        return namespace or DEFAULT_NAMESPACE

    def search_memories(self, args: SearchMemoriesInput, context: Context) -> SearchMemoriesResult:
        caller, namespace = self._caller(context, args.namespace)
        result = caller.search(namespace, args.to_request())
        return SearchMemoriesResult.of(result)

    def get_memory(self, args: GetMemoryInput, context: Context) -> MemoryRecord:
        caller, namespace = self._caller(context, args.namespace)
        record = caller.get(namespace, args.id, args.version, min_trust=args.min_trust)
        return MemoryRecord.of(record)

    def memory_history(self, args: MemoryHistoryInput, context: Context) -> MemoryHistoryResult:
        caller, namespace = self._caller(context, args.namespace)
        versions = caller.history(
            namespace, args.id, versions=args.versions, min_trust=args.min_trust
        )
        return MemoryHistoryResult(versions=[MemoryRecord.of(record) for record in versions])

    def add_memory(self, args: AddMemoryInput, context: Context) -> WriteResult:
        caller, namespace = self._caller(context, args.namespace)
        record = parse_model(Record, args.model_dump(exclude={"namespace"}, exclude_none=True))
        result = caller.upsert(namespace, [record])
        return WriteResult(
            id=result.ids[0], version=result.versions[0], namespace=namespace,
            warnings=result.warnings,
        )  # fmt: skip

    def revise_memory(self, args: ReviseMemoryInput, context: Context) -> WriteResult:
        caller, namespace = self._caller(context, args.namespace)
        # What the caller leaves out is kept from the memory being revised (the
        # service's one inheritance rule); the key is handed over by the store.
        fields = args.model_dump(exclude={"namespace", "id"}, exclude_none=True)
        result = caller.supersede(namespace, args.id, parse_model(Record, fields))
        return WriteResult(
            id=result.ids[0], version=result.versions[0], namespace=namespace,
            replaced=args.id, warnings=result.warnings,
        )  # fmt: skip

    def forget_memory(self, args: ForgetMemoryInput, context: Context) -> ForgetResult:
        caller, namespace = self._caller(context, args.namespace)
        caller.delete(namespace, args.id, hard=False)
        return ForgetResult(id=args.id, namespace=namespace)


def caller_token(context: Context) -> Token | None:
    """The token the HTTP app authenticated for this call; ``None`` for a local caller
    (stdio, in memory, or HTTP without auth)."""
    request = context.request_context.request
    scope = getattr(request, "scope", None)
    token = scope.get(TOKEN_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return token if isinstance(token, Token) else None


def refusal(error: ErstwhileError) -> ToolError:
    """A erstwhile error as the tool failure a client sees: code first, then the fix."""
    return ToolError(f"{error.code}: {error.message}")


def _strict(field: FieldInfo) -> tuple[Strict, ...]:
    """``Strict()`` for a tool argument, so the SDK's validation takes JSON types as sent
    (``"10"`` is not a number, ``1`` is not true) rather than coercing them; a type
    that is exact already (a ``Literal``) takes no marker."""
    try:
        strict: Any = Annotated[field.annotation, Strict()]  # a type built at run time
        TypeAdapter(strict)
    except (RuntimeError, TypeError):
        return ()
    return (Strict(),)


def _tool_function(spec: ToolSpec, body: Callable[[Any, Context], _Output]) -> Callable[..., Any]:
    """A function the SDK can register: its signature lists the input model's fields
    (so the tool's schema is the model's), and it parses its arguments into the model
    and runs the body, turning erstwhile errors into ``ToolError``."""

    def call(ctx: Context, **arguments: Any) -> Any:
        try:
            return body(parse_model(spec.input_model, arguments), ctx)
        except ErstwhileError as error:
            raise refusal(error) from None

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, field in spec.input_model.model_fields.items():
        described = Field(alias=field.alias, description=field.description)
        default = (
            inspect.Parameter.empty
            if field.is_required()
            else field.get_default(call_default_factory=True)
        )
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default,
                annotation=Annotated[
                    (field.annotation, *field.metadata, described, *_strict(field))
                ],
            )
        )  # fmt: skip
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=spec.output_model
    )
    call.__name__ = spec.name
    call.__doc__ = spec.description
    return call


class MemoryServer(MCPServer):
    """An :class:`MCPServer` whose tool failures all read ``<code>: <message>``."""

    def __init__(
        self,
        *,
        specs: Mapping[str, ToolSpec],
        read_only: bool,
        tools: MemoryTools,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.specs = dict(specs)
        self.read_only = read_only
        self.tools = tools

    def _allowed(self, name: str, arguments: dict[str, Any], context: Context | None) -> None:
        """The caller's capability for the tool and its namespace, decided before its
        arguments are read (as REST decides before the body): a token limited to other
        namespaces is refused whatever else the call gets wrong."""
        token = caller_token(context) if context is not None else None
        if token is None:
            return
        given = arguments.get("namespace")
        namespace = self.tools.namespace_for(given if isinstance(given, str) else None, token)
        if given is not None and not isinstance(given, str):
            namespace = ""  # no namespace a token may be limited to
        capability = Capability.WRITE if name in WRITE_TOOLS else Capability.READ
        token.require(capability, namespace)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        spec = self.specs.get(name)
        if spec is None:
            if name in WRITE_TOOLS and self.read_only:
                raise refusal(Forbidden(f"{name} is not available: this connection is read-only"))
            known = ", ".join(self.specs)
            raise refusal(InvalidInput(f"there is no tool {quoted(name)}; the tools are {known}"))
        try:
            self._allowed(name, arguments, context)
        except ErstwhileError as error:
            raise refusal(error) from None
        unknown = sorted(set(arguments) - spec.argument_names)
        if unknown:
            known = ", ".join(sorted(spec.argument_names))
            raise refusal(
                InvalidInput(f"{unknown[0]} is not an argument of {name}; it takes {known}")
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):  # the SDK checked the input schema
                raise refusal(as_invalid_input(cause)) from None
            if type(cause) is ToolError:  # raised by a tool body, already coded
                raise cause from None
            raise


def build_mcp_server(
    service: Service, *, read_only: bool = False, namespace: str | None = None
) -> MCPServer:
    """The MCP server for one service. ``read_only`` lists and allows only the read
    tools; ``namespace`` is the default memory space of every tool (else ``default``,
    or over HTTP the one namespace a token is limited to)."""
    tools = MemoryTools(service, namespace)
    specs = [spec for spec in TOOLS if not read_only or spec.name in READ_TOOLS]
    default = namespace or DEFAULT_NAMESPACE
    access = (
        "This server is read-only: search and read memories; it cannot change them."
        if read_only
        else "You can search, add, revise and forget memories."
    )
    server = MemoryServer(
        specs={spec.name: spec for spec in specs},
        read_only=read_only,
        tools=tools,
        name=SERVER_NAME,
        title="erstwhile memory",
        instructions=(
            "erstwhile is your long-term memory: records that know when they were true. "
            "Search it before answering from memory; save what is worth keeping across "
            "conversations; revise a memory when it changes rather than adding a "
            f"contradicting one. {access} Default namespace: {default}."
        ),
        version=_package_version(),
        log_level="WARNING",
    )
    for spec in specs:
        body = getattr(tools, spec.name)
        server.add_tool(
            _tool_function(spec, body),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=spec.annotations,
            structured_output=True,
        )
    return server


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("erstwhile")
    except PackageNotFoundError:
        return "unknown"


# -- transports ----------------------------------------------------------------------


def run_stdio(service: Service, *, read_only: bool = False, namespace: str | None = None) -> None:
    """Serves MCP over this process's stdin/stdout until the client closes stdin.

    While serving, the SDK points file descriptor 1 at stderr, so nothing but
    protocol messages reaches stdout."""
    build_mcp_server(service, read_only=read_only, namespace=namespace).run("stdio")


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def bearer_secret(scope: Scope) -> str | None:
    """The secret of an ``Authorization: Bearer <secret>`` header, else ``None``."""
    scheme, _, secret = (Headers(scope=scope).get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return secret.strip() or None


@dataclass
class _Serving:
    managers: dict[bool, StreamableHTTPSessionManager]
    authenticate: Callable[[str | None], Token] | None


class McpHttpApp:
    """The ASGI app serving MCP over streamable HTTP; mount it at ``/mcp``.

    It serves while :meth:`running` is entered (in the host app's lifespan: a mounted
    app's own lifespan is not run by Starlette or FastAPI). With ``auth`` each request
    needs ``Authorization: Bearer <token>``, checked like every REST request
    (:meth:`erstwhile.access.Access.authenticate`): a token without the ``write``
    capability reaches the read-only server, any other the full one; the tools check
    the token's namespaces and ledger its id, and a session is bound to the token that
    opened it. Without ``auth`` every caller is local, with full access.
    """

    def __init__(
        self, *, namespace: str | None = None, host: str = "127.0.0.1", stateless: bool = False
    ) -> None:
        self.namespace = namespace
        self.stateless = stateless
        self.security: TransportSecuritySettings | None = None
        self.host = host
        if host in LOOPBACK_HOSTS:  # refuse DNS rebinding, as the SDK does on loopback
            self.security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
        self._serving: _Serving | None = None

    @asynccontextmanager
    async def running(self, service: Service, *, auth: bool = True) -> AsyncIterator[None]:
        """Serves ``service`` until the block ends (once per app)."""
        authenticate = service.access.authenticate if auth else None
        managers: dict[bool, StreamableHTTPSessionManager] = {}
        for read_only in (False, True):
            server = build_mcp_server(service, read_only=read_only, namespace=self.namespace)
            server.streamable_http_app(
                transport_security=self.security, host=self.host, stateless_http=self.stateless
            )
            managers[read_only] = server.session_manager
        async with AsyncExitStack() as stack:
            for manager in managers.values():
                await stack.enter_async_context(manager.run())
            self._serving = _Serving(managers, authenticate)
            log.info("MCP streamable HTTP sessions started (read-only and read/write)")
            try:
                yield
            finally:
                self._serving = None
                log.info("MCP streamable HTTP sessions stopping")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        serving = self._serving
        if serving is None:
            raise RuntimeError("the MCP app is not running: enter McpHttpApp.running() first")
        token: Token | None = None
        if serving.authenticate is not None:
            try:
                token = await anyio.to_thread.run_sync(serving.authenticate, bearer_secret(scope))
                if not token.allows(Capability.READ):
                    raise Forbidden(f"token {token.id} lacks the 'read' capability")
            except ErstwhileError as error:
                status = http_status(error)
                response = JSONResponse(
                    {"error": {"code": error.code, "message": error.message}},
                    status_code=status,
                    headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
                )
                await response(scope, receive, send)
                return
            user = AuthenticatedUser(
                AccessToken(token=token.id, client_id=token.id, scopes=sorted(token.capabilities))
            )
            # The user binds the session to this token (the SDK refuses it to any
            # other); the token itself is what the tools read.
            scope = {**scope, "user": user, TOKEN_SCOPE_KEY: token}
        read_only = token is not None and Capability.WRITE not in token.capabilities
        await serving.managers[read_only].handle_request(scope, receive, send)


def mcp_http_app(
    *, namespace: str | None = None, host: str = "127.0.0.1", stateless: bool = False
) -> McpHttpApp:
    """The streamable HTTP MCP app, to mount at ``/mcp`` and serve inside
    ``async with app.running(service, auth=...)``. ``namespace`` is the tools' default
    namespace; ``host`` is the address the server binds (on loopback, requests naming
    another host are refused, against DNS rebinding). ``stateless``: no sessions, each
    request stands alone — how worker processes serve MCP, since a session lives in one
    process and a client's next connection may reach another."""
    return McpHttpApp(namespace=namespace, host=host, stateless=stateless)


__all__ = [
    "READ_TOOLS",
    "TOOLS",
    "WRITE_TOOLS",
    "McpHttpApp",
    "build_mcp_server",
    "mcp_http_app",
    "run_stdio",
]

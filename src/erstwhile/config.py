"""One ``Settings``, read once at start (SPEC §14): a TOML file, then ``ERSTWHILE_*``.

    erstwhile serve --config erstwhile.toml        (or ERSTWHILE_CONFIG=erstwhile.toml)

Every key can be overridden by an environment variable named after its path, with
``__`` between levels: ``ERSTWHILE_SERVER__PORT=9000``, ``ERSTWHILE_AUTH__ENABLED=false``,
``ERSTWHILE_POLICY__MAX_TOP_K=50``, ``ERSTWHILE_EMBEDDING__PROVIDER=hash``,
``ERSTWHILE_EXTRACTION__PROVIDER=heuristic``,
``ERSTWHILE_NAMESPACES__WORK__EMBEDDING__PROVIDER=hash``. Precedence, highest
first: explicit overrides (command-line options), environment, file, defaults.

With no file and no variables, erstwhile runs: SQLite in the user data directory,
the best embedder available offline, extraction off, auth on, loopback only.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Trust, validate_namespace
from erstwhile.domain.validation import as_invalid_input
from erstwhile.domain.words import check_language
from erstwhile.embedding.binding import EmbedderSpec, build_embedder
from erstwhile.embedding.config import EmbedderConfig
from erstwhile.extraction.config import ExtractorConfig
from erstwhile.memory import CONFIG_ENV, MAX_WORKERS, Memory
from erstwhile.memory import open_memory as open_embedded
from erstwhile.policy import Policy
from erstwhile.store import StorageOptions

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7077
DEFAULT_GRPC_PORT = 7078

_file_data: ContextVar[dict[str, Any] | None] = ContextVar("erstwhile_config_file", default=None)


class StorageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        default=None,
        description="A SQLite file path or sqlite:///PATH URL "
        "(default: ERSTWHILE_DB, else erstwhile.db in the user data directory)",
    )
    pool_size: int = Field(
        default=10, ge=1, le=1000, description="PostgreSQL: connections in the pool at most"
    )
    pool_timeout: float = Field(
        default=10.0, gt=0, le=3600,
        description="PostgreSQL: seconds a request waits for a pooled connection "
        "(then erstwhile.storage.unavailable)",
    )  # fmt: skip
    statement_timeout: float = Field(
        default=0.0, ge=0, le=86400,
        description="PostgreSQL: seconds a statement may run before it is cancelled "
        "(erstwhile.storage.unavailable); 0 = no limit",
    )  # fmt: skip

    def options(self) -> StorageOptions:
        return StorageOptions(
            pool_size=self.pool_size,
            pool_timeout=self.pool_timeout,
            statement_timeout=self.statement_timeout,
        )


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)
    grpc_port: int = Field(
        default=DEFAULT_GRPC_PORT, ge=0, le=65535, description="gRPC beside REST; 0 = off"
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=MAX_WORKERS,
        description="Server processes sharing the database and the ports (erstwhile serve "
        "--workers); about one per core",
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Request handlers each worker process runs at once; the others wait "
        "their turn. Default: 1 on SQLite, where a handler's work is Python and numpy under "
        "one interpreter lock, so handlers run side by side only slow each other; 40 on "
        "PostgreSQL, where handlers mostly wait on the database",
    )
    mine_roots: list[str] = Field(
        default_factory=list,
        description="Folders a REST mine job may read (each, and everything under it). "
        "Empty (the default): the server mines nothing over REST.",
    )


class AuthSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True,
        description="Require a bearer token on every /v1 request. May be turned off "
        "only when the server binds a loopback address.",
    )


class PolicySettings(BaseModel):
    """Server caps. Exceeding one is a 422 ``erstwhile.policy.limit``, never a truncation."""

    model_config = ConfigDict(extra="forbid")

    max_top_k: int = Field(default=1000, gt=0)
    max_candidate_k: int = Field(default=10_000, gt=0)
    max_records_per_upsert: int = Field(default=1000, gt=0)
    max_content_bytes: int = Field(default=1_000_000, gt=0)
    max_max_rows: int = Field(default=100_000, gt=0)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    default_view: Trust = Field(
        default="unverified",
        description="The least trust every read sees unless it asks otherwise (a search's "
        "min_trust, a get's or history's min_trust): 'unverified' = every record, "
        "'verified' = only records an admin verified. [namespaces.NAME] default_view "
        "overrides it for one namespace.",
    )

    def caps(self, views: Mapping[str, Trust] | None = None) -> Policy:
        """The service's policy; ``views``: per-namespace trust views."""
        return Policy(
            max_top_k=self.max_top_k,
            max_candidate_k=self.max_candidate_k,
            max_records_per_upsert=self.max_records_per_upsert,
            max_content_bytes=self.max_content_bytes,
            max_max_rows=self.max_max_rows,
            default_view=self.default_view,
            views=dict(views or {}),
        )


class EmbeddingSettings(EmbedderConfig):
    """An embedder (``[embedding]`` or ``[namespaces.NAME.embedding]``) and its cache.

    ``provider = "none"`` turns embedding off (lexical search only)."""

    cache_size: int = Field(
        default=0, description="LRU entries per embedder: 0 = default (4,096), negative = off"
    )

    def spec(self) -> EmbedderSpec:
        if self.provider.strip().lower() == "none":
            return "none"
        return EmbedderConfig(**self.model_dump(exclude={"cache_size"}))


class NamespaceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedding: EmbeddingSettings | None = None
    text_search: str | None = Field(
        default=None,
        description="The lexical lane's language: 'english' (the default: stop words "
        "dropped, words stemmed) or 'simple' (words as written). A change re-indexes "
        "the namespace when the store opens.",
    )
    default_view: Trust | None = Field(
        default=None,
        description="This namespace's trust view ('verified' or 'unverified'); "
        "default: [policy] default_view",
    )

    @field_validator("text_search")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_language(value, "the language")
        except InvalidInput as error:
            raise ValueError(error.message) from None


class _TomlFile(InitSettingsSource):
    """The TOML file read by :func:`load_settings`, as the lowest-priority source."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls, _file_data.get() or {})


class Settings(BaseSettings):
    """Everything erstwhile reads at start. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="ERSTWHILE_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    storage: StorageSettings = Field(default_factory=StorageSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    extraction: ExtractorConfig = Field(default_factory=ExtractorConfig)
    namespaces: dict[str, NamespaceSettings] = Field(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _TomlFile(settings_cls)

    def embedder_specs(self) -> tuple[EmbedderSpec, dict[str, EmbedderSpec]]:
        """The default embedder and the per-namespace ones."""
        overrides = {
            name: ns.embedding.spec()
            for name, ns in self.namespaces.items()
            if ns.embedding is not None
        }
        return self.embedding.spec(), overrides

    def trust_views(self) -> dict[str, Trust]:
        """The namespaces whose trust view differs from [policy] default_view's."""
        return {
            name: ns.default_view
            for name, ns in self.namespaces.items()
            if ns.default_view is not None
        }

    def check_exposure(self) -> None:
        """Refuses to serve without auth anywhere but loopback (SPEC §11)."""
        if not self.auth.enabled and not is_loopback(self.server.host):
            raise InvalidInput(
                f"server.host {self.server.host!r} is not a loopback address and auth is "
                "off: anyone who can reach it could read and change every memory. Turn auth "
                "on (the default) and create tokens with `erstwhile token create`, or bind "
                "127.0.0.1"
            )


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    file = Path(path).expanduser()
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise InvalidInput(f"config file {str(file)!r} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"config file {str(file)!r} is a directory") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"config file {str(file)!r} is not valid TOML: {error}") from None


@contextmanager
def _reading(data: dict[str, Any]) -> Iterator[None]:
    token = _file_data.set(data)
    try:
        yield
    finally:
        _file_data.reset(token)


def load_settings(
    path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Reads the config file (``path``, else ``ERSTWHILE_CONFIG``, else none), then the
    ``ERSTWHILE_*`` environment, then ``overrides`` (nested dicts, highest priority).
    A problem is an :class:`InvalidInput` naming the key."""
    if path is None:
        path = os.environ.get(CONFIG_ENV) or None
    data = read_toml(path) if path is not None else {}
    try:
        with _reading(data):
            settings = Settings(**dict(overrides or {}))
    except ValidationError as error:
        raise as_invalid_input(error, "config") from None
    for name in settings.namespaces:
        try:
            validate_namespace(name)
        except InvalidInput as error:
            raise InvalidInput(f"config namespaces.{name}: {error.message}") from None
    return settings


def open_store_only(settings: Settings) -> Memory:
    """The settings' store alone, without embedders or jobs: enough for tokens and
    migrations, and quick to open."""
    embedding = settings.embedding.model_copy(update={"provider": "none"})
    bare = settings.model_copy(update={"embedding": embedding, "namespaces": {}})
    return open_memory(bare, background_jobs=False)


def open_memory(
    settings: Settings, *, background_jobs: bool = True, create: bool = True, caps: bool = True
) -> Memory:
    """Opens the store the settings name, with their embedders (each with its cache
    size) and their policy caps (``caps=False``: none, as the CLI opens it).
    ``create=False`` opens only a store that exists."""

    def embedder(settings_: EmbeddingSettings) -> EmbedderSpec:
        spec = settings_.spec()
        return spec if spec == "none" else build_embedder(spec, settings_.cache_size)

    return open_embedded(
        settings.storage.url,
        embedder=embedder(settings.embedding),
        embedders={
            name: embedder(ns.embedding)
            for name, ns in settings.namespaces.items()
            if ns.embedding is not None
        },
        background_jobs=background_jobs,
        # The CLI leaves the server's caps out but keeps the trust views: what a read
        # sees must not depend on the interface that asks.
        policy=(
            settings.policy.caps(settings.trust_views())
            if caps
            else Policy(default_view=settings.policy.default_view, views=settings.trust_views())
        ),
        create=create,
        extractor=settings.extraction,
        text_search={
            name: ns.text_search
            for name, ns in settings.namespaces.items()
            if ns.text_search is not None
        },
        storage=settings.storage.options(),
    )

"""The record: one thing an agent knows, with when it was true and when it was recorded."""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.time import format_instant, from_us, parse_instant, to_us
from erstwhile.domain.validation import (
    MAX_METADATA_KEYS,
    MAX_TAGS,
    capped,
    quoted,
    reraise_erstwhile,
)
from erstwhile.domain.vectors import MAX_INT64, vector_problem

NAMESPACE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
MAX_ID_LENGTH = 256

Trust = Literal["unverified", "verified"]


def _instant(value: Any) -> Any:
    if value is None:
        return None
    return from_us(parse_instant(value, "instant"))


Instant = Annotated[
    datetime,
    BeforeValidator(reraise_erstwhile(_instant)),
    PlainSerializer(lambda value: format_instant(to_us(value)), return_type=str),
]


def _text_value(value: Any) -> Any:
    """Metadata values are strings; numbers and booleans are written as their JSON text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number or a string")
        return str(value)
    return value


MetadataValue = Annotated[str, BeforeValidator(_text_value)]


def validate_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.match(namespace):
        raise InvalidInput(
            f"namespace {quoted(namespace)} is invalid: use 1-63 characters of a-z, 0-9, "
            "'_' and '-', starting with a letter or digit"
        )
    return namespace


def validate_record_id(record_id: object, field: str = "id") -> str:
    if not isinstance(record_id, str) or not record_id:
        raise InvalidInput(f"{field} must be a non-empty string")
    if len(record_id) > MAX_ID_LENGTH:
        raise InvalidInput(f"{field} is {len(record_id)} characters; the limit is {MAX_ID_LENGTH}")
    if not record_id.isprintable():
        raise InvalidInput(f"{field} must contain only printable characters")
    return record_id


class Origin(BaseModel):
    """Where a mined record came from."""

    model_config = ConfigDict(extra="forbid")

    source: str
    document: str
    chunk: int = Field(ge=0)
    revision: str | None = None


class Record(BaseModel):
    """A memory. On write, server-set fields (version, timestamps, trust, superseded_by)
    are ignored; on read, optional fields that are unset are absent from JSON."""

    model_config = ConfigDict(
        extra="forbid",
        ser_json_bytes="base64",
        val_json_bytes="base64",
        validate_assignment=False,
    )

    id: str = Field(default="", max_length=MAX_ID_LENGTH)
    namespace: str = ""
    content: str = ""
    payload: bytes | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    kind: str = "note"
    key: str | None = None
    trust: Trust = "unverified"
    source: str | None = None
    origin: Origin | None = None
    created_at: Instant | None = None
    updated_at: Instant | None = None
    valid_from: Instant | None = None
    valid_to: Instant | None = None
    deleted_at: Instant | None = None
    supersedes: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    version: int | None = Field(default=None, ge=1, le=MAX_INT64)
    if_version: int | None = Field(default=None, ge=0, le=MAX_INT64)
    vector: list[float] | None = None
    #: Output only, on a version read as known at a past instant (``known_at``): when
    #: a later version replaced it. Its record-time range is [updated_at, known_until).
    known_until: Instant | None = None

    @field_validator("id")
    @classmethod
    def _printable_id(cls, value: str) -> str:
        if value and not value.isprintable():
            raise ValueError("must contain only printable characters")
        return value

    # counted before pydantic reads an item: the work below grows with the count
    _count_tags = field_validator("tags", mode="before")(capped("tags"))
    _count_metadata = field_validator("metadata", mode="before")(capped("metadata"))

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not tag.strip():
                raise ValueError("tags must be non-empty strings")
        return list(dict.fromkeys(tags))

    @field_validator("kind")
    @classmethod
    def _lower_kind(cls, kind: str) -> str:
        kind = kind.strip().lower()
        if not kind:
            raise ValueError("must be a non-empty word such as note, fact or decision")
        return kind

    @field_validator("key")
    @classmethod
    def _non_empty_key(cls, key: str | None) -> str | None:
        if key is not None and not key.strip():
            raise ValueError("must be a non-empty string when given")
        return key

    @field_validator("vector")
    @classmethod
    def _finite_vector(cls, vector: list[float] | None) -> list[float] | None:
        problem = None if vector is None else vector_problem(vector)
        if problem is not None:
            raise ValueError(problem)
        return vector

    @field_validator("supersedes")
    @classmethod
    def _supersedes_ids(cls, ids: list[str]) -> list[str]:
        for item in ids:
            validate_record_id(item, "supersedes[]")
        return list(dict.fromkeys(ids))

    @model_validator(mode="after")
    def _ordered_validity(self) -> Record:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be later than valid_from (validity is [from, to))")
        return self

    def content_hash(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()

    def to_json(self, *, include_vector: bool = False) -> dict[str, Any]:
        """The record as JSON-ready data: unset optional fields absent, payload base64."""
        # exclude_none drops the unset ones already; an exclude set costs pydantic more
        # than the dump itself (19 against 8 us a record), so name only fields set
        hidden = ("if_version",) if include_vector else ("if_version", "vector")
        exclude = {name for name in hidden if getattr(self, name) is not None} or None
        data = self.model_dump(mode="json", exclude_none=True, exclude=exclude)
        if not data.get("supersedes"):
            data.pop("supersedes", None)
        return data


def history_entry(record: Record) -> dict[str, Any]:
    """A history entry as JSON: the record, always with its record-time range
    (``updated_at`` .. ``known_until``, null while it is the current version)."""
    data = record.to_json()
    data["known_until"] = data.get("known_until")
    return data


#: Fields only the store sets. A write that sends one is refused rather than having it
#: silently ignored: a caller that thinks it can set ``trust`` or ``version`` is wrong.
SERVER_FIELDS = (
    "trust", "version", "superseded_by", "created_at", "updated_at", "known_until",
)  # fmt: skip


def _without_server_fields(schema: dict[str, Any]) -> None:
    for name in SERVER_FIELDS:
        schema.get("properties", {}).pop(name, None)


class RecordInput(Record):
    """A record as a caller writes it (every wire format, and mappings given to the
    Python API): the same fields, except that :data:`SERVER_FIELDS` are refused (and
    absent from its JSON schema)."""

    model_config = ConfigDict(json_schema_extra=_without_server_fields)

    # A field validator, not a model one: a model "before" validator would hand the
    # fields over as Python values, and strict JSON parsing of the rest would change.
    @field_validator(*SERVER_FIELDS, mode="before")
    @classmethod
    def _server_owned(cls, value: Any, info: ValidationInfo) -> Any:
        raise ValueError(
            f"{info.field_name} is set by the server, never by a write; remove it "
            "(verify promotes trust, if_version checks a version, supersedes links records)"
        )


R = TypeVar("R", bound=Record)


def updated(record: R, update: dict[str, Any]) -> R:
    """``record.model_copy(update=update)``, the same copy (``update`` is trusted, as
    there), without the copy protocol's detours: every write makes one or two."""
    copy = object.__new__(type(record))
    object.__setattr__(copy, "__dict__", {**record.__dict__, **update})
    object.__setattr__(
        copy, "__pydantic_fields_set__", record.__pydantic_fields_set__ | update.keys()
    )
    extra = record.__pydantic_extra__
    object.__setattr__(copy, "__pydantic_extra__", None if extra is None else dict(extra))
    private = record.__pydantic_private__
    object.__setattr__(copy, "__pydantic_private__", None if private is None else dict(private))
    return copy


def superseding(record: Record, old_id: str) -> Record:
    """``record`` as the successor of ``old_id`` (what ``supersede`` writes)."""
    validate_record_id(old_id, "old_id")
    return updated(record, {"supersedes": [*record.supersedes, old_id]})


INHERITED_FIELDS = ("kind", "tags", "metadata", "source")
"""What a revision keeps from the record it supersedes unless it gives its own. The
key is handed over by the store; validity, content and payload are the revision's."""


def inheriting(revision: Record, predecessor: Record) -> Record:
    """``revision`` with every field of :data:`INHERITED_FIELDS` it did not set taken
    from ``predecessor`` (a field set to an empty value, e.g. ``tags=[]``, is set)."""
    update = {
        name: getattr(predecessor, name)
        for name in INHERITED_FIELDS
        if name not in revision.model_fields_set
    }
    return updated(revision, update) if update else revision


class UpsertResult(BaseModel):
    ids: list[str]
    versions: list[int]
    warnings: list[str] = Field(default_factory=list)


# -- the plain record: a mapping of the common shape, built without the validator ------

#: The fields :func:`plain_record` builds itself (anything else goes to the validator).
_PLAIN_FIELDS = frozenset(
    {"id", "content", "metadata", "tags", "kind", "key", "source", "valid_from", "valid_to",
     "supersedes", "if_version", "vector"}
)  # fmt: skip
#: The one shape of instant taken here: UTC with a ``Z``, microseconds or none, as
#: erstwhile itself writes them (any other shape goes through :func:`parse_instant`).
_PLAIN_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{6})?Z")
_new = object.__new__
_setattr = object.__setattr__


def _plain_instant(value: Any) -> datetime | None:
    if type(value) is not str or not _PLAIN_INSTANT.fullmatch(value):
        return None
    try:  # the same aware UTC datetime as from_us(parse_instant(value))
        return datetime.fromisoformat(value)
    except ValueError:  # e.g. a 30th of February: the validator says what is wrong
        return None


def _plain_id(value: Any) -> bool:
    return type(value) is str and 0 < len(value) <= MAX_ID_LENGTH and value.isprintable()


def plain_record(data: dict[str, Any], vector: list[float] | None = None) -> RecordInput | None:
    """``data`` as :class:`RecordInput` validates it, when it has the plain shape
    nearly every write has (strings of exactly ``str``, metadata of string values, a
    list of tag strings, instants as UTC ``Z`` text) and passes every check; else
    ``None``, and the caller validates it (which names the first bad field). The
    same record, field for field and with the same fields set
    (tests/store/test_plain_records.py), at a fifth of the validator's cost.
    ``vector``: ``data["vector"]`` already checked (a plain record carries no
    vector otherwise)."""
    if not _PLAIN_FIELDS.issuperset(data):
        return None
    if "vector" in data and (vector is None or data["vector"] is not vector):
        return None
    get = data.get
    record_id = get("id", "")
    content = get("content", "")
    if type(content) is not str or (record_id != "" and not _plain_id(record_id)):
        return None
    metadata: dict[str, Any] = {}
    if "metadata" in data:
        given_metadata = data["metadata"]
        if type(given_metadata) is not dict or len(given_metadata) > MAX_METADATA_KEYS:
            return None
        for name, value in given_metadata.items():
            if type(name) is not str or type(value) is not str:
                return None
        metadata = dict(given_metadata)
    tags: list[str] = []
    if "tags" in data:
        given_tags = data["tags"]
        if type(given_tags) is not list or len(given_tags) > MAX_TAGS:
            return None
        for tag in given_tags:
            if type(tag) is not str or not tag.strip():
                return None
        tags = list(dict.fromkeys(given_tags))
    kind = get("kind", "note")
    if type(kind) is not str:
        return None
    kind = kind.strip().lower()
    key, source, if_version = get("key"), get("source"), get("if_version")
    if key is not None and (type(key) is not str or not key.strip()):
        return None
    if source is not None and type(source) is not str:
        return None
    if if_version is not None and (type(if_version) is not int or not 0 <= if_version <= MAX_INT64):
        return None
    valid_from = valid_to = None
    if get("valid_from") is not None and (valid_from := _plain_instant(data["valid_from"])) is None:
        return None
    if get("valid_to") is not None and (valid_to := _plain_instant(data["valid_to"])) is None:
        return None
    if not kind or (valid_from and valid_to and valid_to <= valid_from):
        return None
    supersedes: list[str] = []
    if "supersedes" in data:
        given_supersedes = data["supersedes"]
        if type(given_supersedes) is not list or not all(map(_plain_id, given_supersedes)):
            return None
        supersedes = list(dict.fromkeys(given_supersedes))
    record = _new(RecordInput)
    _setattr(record, "__dict__", {
        "id": record_id, "namespace": "", "content": content, "payload": None,
        "metadata": metadata, "tags": tags, "kind": kind, "key": key,
        "trust": "unverified", "source": source, "origin": None, "created_at": None,
        "updated_at": None, "valid_from": valid_from, "valid_to": valid_to,
        "deleted_at": None, "supersedes": supersedes, "superseded_by": None,
        "version": None, "if_version": if_version, "vector": vector, "known_until": None,
    })  # fmt: skip
    _setattr(record, "__pydantic_fields_set__", set(data))
    _setattr(record, "__pydantic_extra__", None)
    _setattr(record, "__pydantic_private__", None)
    return record

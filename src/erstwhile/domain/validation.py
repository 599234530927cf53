"""Turns pydantic's validation errors into erstwhile's one input error; quotes a
caller's input in a message (:func:`quoted`, bounded); and the counts a record or a
search scope may hold (:data:`MAX_TAGS`, :data:`MAX_METADATA_KEYS`,
:data:`MAX_FILTER`, :data:`MAX_PREDICATES`), checked by length before any work that
grows with them."""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from erstwhile.domain.errors import ErstwhileError, InvalidInput

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    parts: list[str] = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:  # a key of the caller's (an unknown field, a metadata key): bounded
            name = item if len(item) <= QUOTE_CHARS else item[:QUOTE_CHARS] + "…"
            parts.append(("." if parts else "") + name)
    return "".join(parts) or "request"


def as_invalid_input(error: ValidationError, prefix: str = "") -> InvalidInput:
    """One readable message per problem, each naming the field it is about."""
    messages = []
    for problem in error.errors()[:5]:
        path = field_path(tuple(problem["loc"]), prefix)
        kind = problem["type"]
        if kind == "extra_forbidden":
            messages.append(f"{path} is not a known field; remove it")
        elif kind == "missing":
            messages.append(f"{path} is required")
        else:
            text = str(problem["msg"]).removeprefix("Value error, ")
            messages.append(f"{path}: {text}")
    return InvalidInput("; ".join(messages))


def parse_model(model: type[M], data: Any, prefix: str = "") -> M:
    """Validates ``data`` as ``model``; any problem becomes :class:`InvalidInput`."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise as_invalid_input(error, prefix) from None


def reraise_erstwhile(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Lets validators raise ErstwhileError without pydantic wrapping it twice."""

    def wrapper(value: Any) -> Any:
        try:
            return fn(value)
        except ErstwhileError as error:
            raise ValueError(error.message) from None

    return wrapper


# -- echoing a caller's input, and the counts a record or a scope may hold ---------------

#: The most characters of a caller's value an error message quotes: a message (and a
#: gRPC status carrying it in a header) stays small whatever was sent.
QUOTE_CHARS = 64

_QUOTE = reprlib.Repr()
_QUOTE.maxlevel = 2
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 4
_QUOTE.maxstring = _QUOTE.maxother = QUOTE_CHARS


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """``value`` as an error message shows it: the repr of a string, cut to its first
    ``limit`` characters (saying how long it was); any other value as a bounded repr.
    Every message that echoes input quotes it with this."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    return _QUOTE.repr(value)[: 4 * limit]


#: Tags a record may carry, and a search or expire scope may ask for (all of).
MAX_TAGS = 256
#: Metadata keys a record may carry (the LangGraph store writes one per leaf of a value).
MAX_METADATA_KEYS = 1024
#: Entries a scope's ``filter`` may hold.
MAX_FILTER = 256
#: Predicates one search or expire may hold.
MAX_PREDICATES = 64

#: Characters a search's query text may hold (a long passage is welcome; a query of
#: more distinct words than the database binds in one statement is not).
MAX_QUERY_CHARS = 65_536


def bounded_query(value: Any) -> Any:
    """A pydantic "before" validator refusing a query text over
    :data:`MAX_QUERY_CHARS`, first."""
    if isinstance(value, str) and len(value) > MAX_QUERY_CHARS:
        raise ValueError(
            f"holds {len(value):,} characters; a search takes at most {MAX_QUERY_CHARS:,}: "
            "search with the passage's key sentences, or with its embedding (query_vector)"
        )
    return value


_COUNTED = {
    "tags": (MAX_TAGS, "tags", "keep the ones you search by"),
    "metadata": (MAX_METADATA_KEYS, "keys", "put the rest in content or payload"),
}
_SCOPE_COUNTED = {
    "tags": (MAX_TAGS, "tags", "scope by fewer tags"),
    "filter": (MAX_FILTER, "entries", "filter by fewer keys"),
    "predicates": (MAX_PREDICATES, "predicates", "combine values with IN, or use fewer"),
}


def count_problem(field: str, value: object, *, scope: bool = False) -> str | None:
    """What is wrong with the size of a counted field of a record (``tags``,
    ``metadata``) or of a search or expire scope (``scope``: ``tags``, ``filter``,
    ``predicates``), or None. It reads only ``len``: it runs before any work that
    grows with the count."""
    cap, unit, fix = (_SCOPE_COUNTED if scope else _COUNTED)[field]
    if isinstance(value, list | tuple | dict | set | frozenset) and len(value) > cap:
        where = "a search or expire scope" if scope else "a record"
        return f"holds {len(value):,} {unit}; {where} takes at most {cap:,}: {fix}"
    return None


def capped(field: str, *, scope: bool = False) -> Callable[[Any], Any]:
    """A pydantic "before" validator refusing ``field`` over its count, first."""

    def check(value: Any) -> Any:
        problem = count_problem(field, value, scope=scope)
        if problem is not None:
            raise ValueError(problem)
        return value

    return check


def check_counts(fields: Mapping[str, object], prefix: str, *, scope: bool = False) -> None:
    """The same caps on values already built (a record or request made in code, or
    copied without validation): :class:`InvalidInput` naming ``prefix`` + field."""
    for field, value in fields.items():
        problem = count_problem(field, value, scope=scope)
        if problem is not None:
            raise InvalidInput(f"{prefix}{field}: {problem}")

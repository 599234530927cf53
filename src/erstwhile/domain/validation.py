"""Turns pydantic's validation errors into erstwhile's one input error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from erstwhile.domain.errors import ErstwhileError, InvalidInput

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    parts: list[str] = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
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

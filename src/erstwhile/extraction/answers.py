"""Reading a provider's answer with bounds, before anything trusts it.

A model's answer is data from outside: it can be huge, nested past what the
interpreter's recursion allows, hold integers hundreds of digits long or strings
that are not text. Each of those once escaped the extract job as a raw
``RecursionError``, ``OverflowError`` or ``UnicodeEncodeError``. So every answer is
read through :func:`parse_answer` (JSON text) or checked by :func:`check_answer` (an
in-process provider's Python value), which refuse with :class:`AnswerRefused` (a
``ValueError``) saying which bound was passed:

- size: at most :data:`MAX_ANSWER_BYTES` bytes of JSON;
- depth: nesting at most :data:`MAX_DEPTH` deep, checked on the text *before*
  ``json.loads`` recurses into it;
- numbers: integers of at most :data:`MAX_INT_DIGITS` digits (a float that overflows
  reads as infinity, which :func:`~erstwhile.domain.graph.normalise_extraction` drops);
- strings: valid UTF-8, no lone surrogate (``"\\ud800"``), keys included;
- size of a Python value: at most :data:`MAX_NODES` containers and scalars.

What a provider does with a refusal is its own rule: the HTTP extractor reads it as
"nothing found" (SPEC §8), the command extractor fails the job with the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_ANSWER_BYTES = 1_000_000
MAX_DEPTH = 16
MAX_INT_DIGITS = 18
MAX_NODES = 200_000

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class AnswerRefused(ValueError):
    """A provider's answer passed a bound; the message says which."""


def parse_answer(raw: str | bytes, *, what: str = "the answer") -> Any:
    """``raw`` (JSON) read within the bounds; :class:`AnswerRefused` otherwise (and
    ``ValueError`` when it is not JSON at all)."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_ANSWER_BYTES:
        raise AnswerRefused(f"{what} is {size} bytes, over the {MAX_ANSWER_BYTES} read")
    # not UTF-8: UnicodeDecodeError, a ValueError like every refusal here
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise AnswerRefused(f"{what} nests deeper than {MAX_DEPTH}")
    value = json.loads(text, parse_int=lambda digits: _integer(digits, what))
    check_answer(value, what=what)
    return value


def _integer(digits: str, what: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise AnswerRefused(
            f"{what} holds an integer of {len(digits)} digits, over {MAX_INT_DIGITS}"
        )
    return int(digits)


def check_answer(value: object, *, what: str = "the answer") -> None:
    """Refuses a Python value past the bounds: nesting, node count, integer size,
    strings that are not valid UTF-8 (a lone surrogate). Walks without recursion."""
    stack: list[tuple[object, int]] = [(value, 0)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise AnswerRefused(f"{what} holds more than {MAX_NODES} values")
        if isinstance(item, str):
            _check_text(item, what)
        elif isinstance(item, bool | float) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) >= 10**MAX_INT_DIGITS:
                raise AnswerRefused(f"{what} holds an integer over {MAX_INT_DIGITS} digits")
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise AnswerRefused(f"{what} nests deeper than {MAX_DEPTH}")
            if isinstance(item, dict):
                for key in item:
                    if isinstance(key, str):
                        _check_text(key, what)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise AnswerRefused(
            f"{what} holds a string that is not valid UTF-8 (a lone surrogate such as "
            f"{text.encode('utf-8', 'backslashreplace')[:40].decode('ascii', 'replace')!r})"
        ) from None

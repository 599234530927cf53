"""The bounded read of provider answers (erstwhile.extraction.answers) against a
brute-force oracle: a value is accepted, equal to what ``json.loads`` reads, exactly
when it nests at most MAX_DEPTH deep, its integers have at most MAX_INT_DIGITS digits
and every string and key is valid UTF-8; otherwise it is refused with AnswerRefused,
never a RecursionError, OverflowError or UnicodeEncodeError."""

from __future__ import annotations

import json
import math
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from erstwhile.extraction.answers import (
    MAX_ANSWER_BYTES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    AnswerRefused,
    parse_answer,
)

TEXT = st.text(alphabet=st.sampled_from(list('ab[]{}"\\\ud800é ')), max_size=6)
SCALARS = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | TEXT
    | st.integers(min_value=-(10 ** (MAX_INT_DIGITS + 2)), max_value=10 ** (MAX_INT_DIGITS + 2))
)


def nested(depth: int) -> st.SearchStrategy[Any]:
    """Values nested exactly up to ``depth`` containers deep, sometimes past the bound."""
    if depth == 0:
        return SCALARS
    inner = nested(depth - 1)
    return st.one_of(
        SCALARS,
        st.lists(inner, max_size=2),
        st.dictionaries(TEXT, inner, max_size=2),
    )


VALUES = st.integers(min_value=0, max_value=MAX_DEPTH + 3).flatmap(
    lambda d: st.lists(nested(d), min_size=1, max_size=1).map(lambda v: v[0])
)


def oracle(value: Any) -> tuple[int, bool]:
    """(nesting, whether every int and string is within bounds)."""
    if isinstance(value, list):
        found = [oracle(v) for v in value]
        return 1 + max((d for d, _ in found), default=0), all(ok for _, ok in found)
    if isinstance(value, dict):
        found = [oracle(v) for v in value.values()] + [oracle(k) for k in value]
        return 1 + max((d for d, _ in found), default=0), all(ok for _, ok in found)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return 0, False
        return 0, True
    if isinstance(value, int) and not isinstance(value, bool):
        return 0, abs(value) < 10**MAX_INT_DIGITS
    return 0, True


@settings(max_examples=200, deadline=None)
@given(value=VALUES, ascii_only=st.booleans())
def test_parse_answer_against_the_oracle(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    depth, within = oracle(value)
    if depth <= MAX_DEPTH and within:
        assert parse_answer(text) == json.loads(text)
        assert parse_answer(text.encode("utf-8")) == json.loads(text)
    else:
        with pytest.raises(AnswerRefused):
            parse_answer(text)


def test_what_crashed_the_extract_job_is_refused() -> None:
    for text in (
        '{"confidence": ' + "9" * 400 + "}",
        "[" * 100_000 + "]" * 100_000,
        '{"name": "Ada\\ud800"}',
        " " * (MAX_ANSWER_BYTES + 1),
    ):
        with pytest.raises(AnswerRefused):
            parse_answer(text)
    assert math.isinf(parse_answer('{"c": 1e400}')["c"])  # a float overflows to infinity
    assert parse_answer('["[[[[", "]]]"]') == ["[[[[", "]]]"]  # brackets in strings count not

"""The REST routes' JSON encoding (``Reply``, pydantic-core) against Starlette's
``json.dumps`` as the oracle: the same JSON values, the same refusals."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from erstwhile.adapters.rest_routes import Reply

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def oracle(content: Any) -> bytes:
    return JSONResponse(content).body


@given(documents)
def test_reply_sends_the_json_values_starlette_sends(content: Any) -> None:
    assert json.loads(Reply(content).body) == json.loads(oracle(content))


@given(st.dictionaries(st.text(), st.text() | st.integers(), max_size=6))
def test_text_and_integers_are_byte_for_byte_what_starlette_sends(content: Any) -> None:
    assert Reply(content).body == oracle(content)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused_as_json_dumps_refuses_it(value: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        Reply({"score": value})
    with pytest.raises(ValueError, match="JSON compliant"):
        oracle({"score": value})


def test_text_that_spells_nan_is_sent_as_text() -> None:
    content = {"content": "NaN and Infinity are words here", "score": 0.5}
    assert Reply(content).body == oracle(content)
    assert json.loads(Reply(content).body) == content


def test_what_json_cannot_encode_fails_as_before() -> None:
    # a route handing over a value json.dumps refuses is a bug either way: a 500
    with pytest.raises(TypeError):
        oracle({"bad": object()})
    with pytest.raises(TypeError):
        Reply({"bad": object()})

"""Vectors as memstrata keeps them: float32, finite, with a direction, of the right size.

Every path that accepts a vector from outside (an upsert's ``vector``, ``set_embedding``,
a search's ``query_vector``, an import line) checks it here, once, as the store will
hold it: a number finite in float64 can be infinite in float32 (``1e39``), and a vector
whose every component is zero has no direction to compare by cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.domain.errors import InvalidInput

#: The largest integer both stores hold (SQLite INTEGER, PostgreSQL bigint).
MAX_INT64 = 2**63 - 1
#: The largest count a request may ask for (top_k, candidate_k, max_rows, limits):
#: far beyond any real store, and small enough that arithmetic on it stays in int64.
MAX_COUNT = 2**31 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _problem(values: Sequence[float], dimensions: int | None) -> tuple[str | None, np.ndarray]:
    """What is wrong with ``values`` (or None), and ``values`` as float64."""
    if len(values) == 0:
        return "must hold at least one number", np.zeros(0)
    if dimensions is not None and len(values) != dimensions:
        return (
            f"has {len(values)} dimensions but the namespace embedder makes {dimensions}; "
            "send a vector of that size"
        ), np.zeros(0)
    data = np.asarray(values, dtype=np.float64)  # one conversion of the list, for every check
    if np.isfinite(data).all() and float(np.abs(data).max()) <= _FLOAT32_MAX:
        stored = data.astype(np.float32)
    else:  # NaN, infinite, or large enough to be infinite as float32 (the cast decides)
        with np.errstate(over="ignore", invalid="ignore"):
            stored = data.astype(np.float32)
    if not np.isfinite(stored).all():
        return "must hold only numbers that are finite as float32 (|x| < 3.4e38, no NaN)", data
    # as float32 holds it: a float64 too small for float32 is a zero there
    if not stored.any():
        return "must not be all zeros (it has no direction)", data
    return None, data


def vector_problem(values: Sequence[float], dimensions: int | None = None) -> str | None:
    """What is wrong with ``values`` as a stored vector, or ``None`` when nothing is."""
    return _problem(values, dimensions)[0]


def checked_vector(
    values: Sequence[float], field: str, dimensions: int | None = None
) -> np.ndarray:
    """``values`` as a unit-length float32 vector, or :class:`InvalidInput` naming ``field``."""
    problem, data = _problem(values, dimensions)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}")
    # the norm in float64: squares of large or tiny float32 values leave float32's range
    return (data / np.sqrt(np.dot(data, data))).astype(np.float32)

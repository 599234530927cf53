"""Vectors as erstwhile keeps them: float32, finite, with a direction, of the right size.

Every path that accepts a vector from outside (an upsert's ``vector``, ``set_embedding``,
a search's ``query_vector``, an import line) checks it here, once, as the store will
hold it: a number finite in float64 can be infinite in float32 (``1e39``), and a vector
whose every component is zero has no direction to compare by cosine.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

from erstwhile.domain.errors import InvalidInput

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


def unit(vector: np.ndarray | Sequence[float]) -> np.ndarray:
    """A unit-length float32 copy, as the store keeps it (cosine is then a dot product):
    normalised in float32, or in float64 when the float32 norm leaves float32's range
    (squares of very large or very small values)."""
    data = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(data))
    if norm > 0 and math.isfinite(norm):
        return data / norm
    wide = np.asarray(vector, dtype=np.float64)
    norm = float(np.sqrt(np.dot(wide, wide)))
    return (wide / norm).astype(np.float32) if norm > 0 else data


_PACKERS: dict[tuple[str, int], struct.Struct] = {}


def _packer(kind: str, size: int) -> struct.Struct:
    """A packer of ``size`` native numbers of ``kind`` (``d`` float64, ``f`` float32)."""
    packer = _PACKERS.get((kind, size))
    if packer is None:
        packer = _PACKERS[kind, size] = struct.Struct(f"={size}{kind}")
    return packer


def _real_vector(vector: np.ndarray, size: int) -> np.ndarray:
    """``vector`` when it is a one-dimensional array of ``size`` real numbers."""
    if vector.ndim != 1 or vector.shape[0] != size or vector.dtype.kind not in "fiub":
        raise TypeError("not a vector of real numbers")
    return vector


def unit_rows(
    vectors: Sequence[Sequence[float] | np.ndarray], dimensions: int | None = None
) -> np.ndarray | None:
    """A batch's vectors checked together, as the unit float32 rows :func:`unit` makes
    of each (the same bits): one conversion of all the numbers and one pass of each
    check over the whole batch instead of one per vector. ``None`` when any vector
    is not a sequence (or a one-dimensional array) of ``dimensions`` (else of the
    first's) real numbers passing every check of :func:`vector_problem`: the caller
    then checks them one at a time, for the message naming the first bad one and its
    index."""
    if not vectors or (isinstance(vectors[0], np.ndarray) and vectors[0].ndim != 1):
        return None
    try:
        size = len(vectors[0])
    except TypeError:  # a number, not a vector
        return None
    if size == 0 or (dimensions is not None and size != dimensions):
        return None
    try:  # a vector of another size, or a value that is not a real number, is refused
        if not any(isinstance(vector, np.ndarray) for vector in vectors):
            # each list's numbers packed as float32, as C casts a double (as unit()
            # converts them); one too large for float32 is refused by the packing
            pack = _packer("f", size).pack
            data = b"".join([pack(*vector) for vector in vectors])
            rows = np.frombuffer(data, dtype=np.float32).reshape(len(vectors), size)
        else:  # each row converted as it is assigned (an array's values as astype gives)
            wide = np.empty((len(vectors), size), dtype=np.float64)
            pack = _packer("d", size).pack
            for i, vector in enumerate(vectors):
                wide[i] = (
                    _real_vector(vector, size)
                    if isinstance(vector, np.ndarray)
                    else np.frombuffer(pack(*vector), dtype=np.float64)
                )
            if not np.isfinite(wide).all():
                return None
            with np.errstate(over="ignore"):  # too large for float32: the cast decides
                rows = wide.astype(np.float32)
    except (struct.error, TypeError, ValueError, OverflowError):  # an int past float range, too
        return None
    if not np.isfinite(rows).all():
        return None
    if not rows.any(axis=1).all():  # all zeros as float32 holds them: no direction
        return None
    with np.errstate(over="ignore"):  # a norm out of float32's range is taken in float64
        # each norm as unit() takes it (one float32 dot per row: a matrix-wide sum
        # adds in another order), so the bits agree; then one division for the batch
        norms = np.sqrt(np.array([row.dot(row) for row in rows], dtype=np.float32))
    usable = (norms > 0) & np.isfinite(norms)
    if usable.all():
        divided: np.ndarray = rows / norms[:, None]
        return divided
    rows = rows.copy()  # writable (a list batch's rows are its packed bytes)
    for row in np.flatnonzero(usable):
        rows[row] /= norms[row]
    for row in np.flatnonzero(~usable):
        rows[row] = unit(vectors[int(row)])
    return rows


def caller_space(dimensions: int) -> str:
    """The vector space of vectors a caller brings to a namespace without an embedder:
    one per size (vectors of different sizes are never compared), stored and searched
    like an embedder's."""
    return f"caller:vectors:{dimensions}"

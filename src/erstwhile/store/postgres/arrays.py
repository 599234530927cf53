"""Array parameters already in PostgreSQL's binary form: ``text[]`` and ``bigint[]``
of a list, built in one pass (an int array by numpy) where psycopg's own list dumper
walks the list in Python, element by element, at about 1.5 µs each (a write's ids
and its batch's terms: thousands a batch). The server reads the same array either
way. None is no element of them: a list holding one goes through psycopg's dumper.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_TEXT, _TEXT_ARRAY = 25, 1009
_INT8, _INT8_ARRAY = 20, 1016
_HEADER = struct.Struct(">iiiii")  # dimensions, has nulls, element type, length, lower bound
_EMPTY = struct.Struct(">iii")
#: Each short length as the element's 4-byte prefix, made once.
_LENGTHS = [struct.pack(">i", n) for n in range(256)]
_LENGTH = struct.Struct(">i").pack
#: An int8 element: its length (8), then its value.
_INT8_ELEMENT = np.dtype([("length", ">i4"), ("value", ">i8")])


class TextArray(bytes):
    """A ``text[]`` parameter in binary form."""

    __slots__ = ()


class BigintArray(bytes):
    """A ``bigint[]`` parameter in binary form."""

    __slots__ = ()


def text_array(values: Sequence[str]) -> TextArray:
    if not values:
        return TextArray(_EMPTY.pack(0, 0, _TEXT))
    parts = [_HEADER.pack(1, 0, _TEXT, len(values), 1)]
    lengths, length = _LENGTHS, _LENGTH
    for value in values:
        data = value.encode()
        size = len(data)
        parts.append(lengths[size] if size < 256 else length(size))
        parts.append(data)
    return TextArray(b"".join(parts))


def bigint_array(values: Sequence[int]) -> BigintArray:
    if not values:
        return BigintArray(_EMPTY.pack(0, 0, _INT8))
    elements = np.empty(len(values), _INT8_ELEMENT)
    elements["length"] = 8
    elements["value"] = values
    return BigintArray(_HEADER.pack(1, 0, _INT8, len(values), 1) + elements.tobytes())


def array(values: Sequence[Any]) -> Any:
    """``values`` as a binary array parameter when they are all str or all int (not
    bool), else as the list itself (psycopg's dumper)."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return text_array(values)
    if kinds == {int}:
        try:
            return bigint_array(values)
        except OverflowError:  # beyond bigint: psycopg sends it as numeric
            pass
    return list(values)


def _dumper(name: str, oid: int) -> type[Dumper]:
    def dump(self: Dumper, obj: bytes) -> bytes:
        return obj

    return type(name, (Dumper,), {"format": Format.BINARY, "oid": oid, "dump": dump})


_TEXT_DUMPER = _dumper("TextArrayDumper", _TEXT_ARRAY)
_BIGINT_DUMPER = _dumper("BigintArrayDumper", _INT8_ARRAY)


def register(conn: psycopg.Connection[Any]) -> None:
    """Lets ``conn`` send :class:`TextArray` and :class:`BigintArray` parameters."""
    conn.adapters.register_dumper(TextArray, _TEXT_DUMPER)
    conn.adapters.register_dumper(BigintArray, _BIGINT_DUMPER)

"""How LangGraph's items map onto erstwhile records: pure functions, no I/O.

An item is ``(namespace tuple, key) -> JSON object``. All the items of one
:class:`~erstwhile.langgraph.ErstwhileStore` live in one erstwhile namespace; the tuple
path and the key travel in metadata, so any LangGraph label (any characters, any
depth) maps exactly, without escaping rules to get wrong. See docs/langgraph.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from erstwhile.domain.errors import InvalidInput

#: Record kinds: the head of an item (its current value, versioned in place, read by
#: ``get`` and listings) and the item's values (a supersession chain: history, as_of
#: and the ranked search).
HEAD_KIND = "langgraph-head"
VALUE_KIND = "langgraph"

#: The one word every head's content holds, so a lexical search for it lists the heads
#: in scope (erstwhile has no query-less scan; a listing is a search that every head
#: matches). Value records never hold it: their content is the item's own text.
HEAD_WORD = "erstwhilelanggraphitem"

NS = "lg.ns"  # the namespace tuple as JSON
DEPTH = "lg.depth"
KEY = "lg.key"
CREATED = "lg.created"  # when the item was first put (RFC 3339)
CURRENT = "lg.current"  # on a head: the id of the item's current value record
INDEXED = "lg.indexed"  # "true" unless the put said index=False


def label_field(position: int) -> str:
    """The metadata key of the namespace label at ``position``."""
    return f"lg.ns.{position}"


def value_field(path: Sequence[str]) -> str:
    """The metadata key of one field of the value. The path is JSON so that a field
    named ``"a.b"`` and a field ``b`` inside ``a`` never collide."""
    return "v" + json.dumps(list(path), ensure_ascii=False, separators=(",", ":"))


MAX_READABLE_KEY = 200


def _item_json(namespace: tuple[str, ...], key: str) -> str:
    return json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))


def _digest(namespace: tuple[str, ...], key: str) -> str:
    return hashlib.sha256(_item_json(namespace, key).encode("utf-8")).hexdigest()


def item_key(namespace: tuple[str, ...], key: str) -> str:
    """The erstwhile ``key`` of an item (unique among current live records, so the
    store itself refuses two current values for one item): the item as JSON, readable
    in erstwhile's tools, or its digest when that is long (keys are indexed)."""
    readable = _item_json(namespace, key)
    if len(readable) <= MAX_READABLE_KEY:
        return readable
    return f"lg:{_digest(namespace, key)}"


def head_id(namespace: tuple[str, ...], key: str) -> str:
    """The head record's id: derived from the item, so ``get`` is one read by id."""
    return f"lgh-{_digest(namespace, key)[:48]}"


def encode_scalar(value: Any) -> str:
    """A JSON scalar (or list) as the metadata text filters compare. Numbers are
    written one way (3 and 3.0 are both ``3``) so equality is numeric equality;
    strings keep their quotes, so the string ``"3"`` never equals the number 3."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"value holds {value!r}, which JSON cannot carry")
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def leaves(
    value: Mapping[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every filterable field of a value: the scalars and lists, nested objects walked."""
    for name, inner in value.items():
        here = (*path, str(name))
        if isinstance(inner, Mapping) and inner:
            yield from leaves(inner, here)
        else:
            yield here, inner


def value_metadata(value: Mapping[str, Any]) -> dict[str, str]:
    return {value_field(path): encode_scalar(leaf) for path, leaf in leaves(value)}


def namespace_metadata(namespace: tuple[str, ...], key: str) -> dict[str, str]:
    fields = {NS: json.dumps(list(namespace), ensure_ascii=False), DEPTH: str(len(namespace))}
    fields.update({label_field(i): label for i, label in enumerate(namespace)})
    fields[KEY] = key
    return fields


def prefix_filter(prefix: Sequence[str]) -> dict[str, str]:
    """The exact metadata filter of a namespace prefix (``"*"`` labels are left out:
    they match any label and are checked on the listed tuples)."""
    return {label_field(i): label for i, label in enumerate(prefix) if label != "*"}


_NUMERIC = {"$gt": "GT", "$gte": "GTE", "$lt": "LT", "$lte": "LTE"}


def filter_scope(
    filter: Mapping[str, Any] | None,
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """LangGraph's ``filter`` as erstwhile's exact ``filter`` and typed ``predicates``.

    ``{"color": "red"}`` and ``{"$eq": …}`` are exact; ``$ne`` is NEQ (like LangGraph's
    PostgreSQL store it matches only items that have the field); ``$gt``, ``$gte``,
    ``$lt``, ``$lte`` compare numbers. A nested object filters the fields inside it."""
    exact: dict[str, str] = {}
    predicates: list[dict[str, Any]] = []

    def walk(conditions: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for name, wanted in conditions.items():
            here = (*path, str(name))
            field = value_field(here)
            if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
                for op, operand in wanted.items():
                    if op == "$eq":
                        exact[field] = encode_scalar(operand)
                    elif op == "$ne":
                        predicates.append(
                            {"key": field, "op": "NEQ", "values": [encode_scalar(operand)]}
                        )
                    elif op in _NUMERIC:
                        predicates.append(
                            {"key": field, "op": _NUMERIC[op], "values": [_number(op, operand)]}
                        )
                    else:
                        raise InvalidInput(
                            f"filter[{name!r}] uses {op!r}; the operators are $eq, $ne, "
                            "$gt, $gte, $lt and $lte"
                        )
            elif isinstance(wanted, Mapping) and wanted:
                walk(wanted, here)
            else:
                exact[field] = encode_scalar(wanted)

    walk(filter or {}, ())
    return exact, predicates


def _number(op: str, operand: Any) -> str:
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        try:
            operand = float(operand)
        except (TypeError, ValueError):
            raise InvalidInput(f"filter {op} compares numbers; {operand!r} is not one") from None
    return encode_scalar(operand)


def matches(namespace: tuple[str, ...], path: Sequence[str], suffix: bool) -> bool:
    """LangGraph's prefix/suffix rule for one namespace (``"*"`` matches any label)."""
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if suffix else namespace[: len(path)]
    return all(want == "*" or have == want for have, want in zip(labels, path, strict=True))

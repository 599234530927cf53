"""The in-memory scope rules shared by the backends' scope copies: a namespace's
records as columns (validity, tombstone, creation and record time, trust, kind) with
inverted lists for tags and metadata, and the test of a search's scope over them.

A backend keeps these per process as a read-through copy of its file or database and
refreshes them from its own change log (SQLite: :mod:`erstwhile.store.sqlite.scope_cache`).
The rules are the SQL scope's (:mod:`erstwhile.store.sql.scope`), written over arrays;
the temporal oracle test (tests/store/test_temporal_oracle.py) checks both against one
brute-force model.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from erstwhile.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from erstwhile.domain.time import Window

#: Request fields the copy answers; a request setting any other falls back to SQL.
SERVED = frozenset(
    {
        "query", "query_vector", "top_k", "ranking", "candidate_k", "kind", "tags",
        "filter", "predicates", "created_after", "created_before", "min_trust", "as_of",
        "between", "include_historical", "expand", "ids_only", "include_payload",
        "include_vector", "require_complete", "known_at",
    }
)  # fmt: skip
OPEN = np.iinfo(np.int64).max  # a NULL valid_to: open-ended
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
}  # fmt: skip
_NUMERIC = {Op.GT: operator.gt, Op.GTE: operator.ge, Op.LT: operator.lt, Op.LTE: operator.le}
#: A records row as the copy reads it (``Tenant.set_row``, :func:`row_columns`).
COLUMNS = "rowid, namespace, valid_from, valid_to, deleted_at, created_at, trust, kind, updated_at"
#: The copy is built on a process's third search: one-shot processes keep the SQL scope.
WARM_AFTER = 3
#: A metadata row as the copy keeps it: key, value and its number (None: not one).
Pair = tuple[str, str, float | None]
#: A record's tags and metadata rows.
Members = tuple[list[str], list[Pair]]


def served(request: SearchRequest) -> bool:
    """Whether the copy can decide this request's scope: no key, and no option it does
    not know set to anything but its empty default."""
    return request.key is None and not any(
        getattr(request, name) for name in request.model_fields_set - SERVED
    )


class Posting:
    """The positions (within one namespace) of the records holding a tag or a metadata
    pair, with their numbers where the value is one; an array view built on demand."""

    def __init__(self) -> None:
        self.members: dict[int, float | None] = {}
        self._array: np.ndarray | None = None
        self._numbers: np.ndarray | None = None

    def add(self, position: int, number: float | None) -> None:
        self.members[position] = number
        self._array = None

    def remove(self, position: int) -> None:
        self.members.pop(position, None)
        self._array = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = np.fromiter(self.members, np.int64, len(self.members))
            numbers = (np.nan if n is None else n for n in self.members.values())
            self._numbers = np.fromiter(numbers, np.float64, len(self.members))
        return self._array

    def numbers(self) -> np.ndarray:
        self.array()
        assert self._numbers is not None
        return self._numbers


class Tenant:
    """One namespace's records as columns, position = order of first appearance."""

    def __init__(self) -> None:
        self.count = 0
        size = 64
        self.rowid = np.zeros(size, np.int64)
        self.valid_from = np.zeros(size, np.int64)
        self.valid_to = np.zeros(size, np.int64)
        self.created_at = np.zeros(size, np.int64)
        self.updated_at = np.zeros(size, np.int64)
        self.live = np.zeros(size, bool)  # not tombstoned
        self.present = np.zeros(size, bool)  # not hard-deleted
        self.codes: dict[str, dict[str, int]] = {"trust": {}, "kind": {}}
        self.trust = np.zeros(size, np.int32)
        self.kind = np.zeros(size, np.int32)
        self.tags: dict[str, Posting] = {}
        self.meta: dict[tuple[str, str], Posting] = {}
        self.values: dict[str, set[str]] = {}  # metadata key -> every value seen
        self.held: dict[int, Members] = {}  # what each record is listed under

    _ARRAYS = ("rowid", "valid_from", "valid_to", "created_at", "updated_at", "live",
               "present", "trust", "kind")  # fmt: skip

    def grow(self, need: int) -> None:
        size = self.rowid.shape[0]
        if need <= size:
            return
        size = max(need, 2 * size)
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)

    def code(self, column: str, text: str) -> int:
        table = self.codes[column]
        return table.setdefault(text, len(table))

    def column(self, name: str) -> np.ndarray | None:
        found = getattr(self, name, None) if name in self._ARRAYS else None
        return found[: self.count] if found is not None else None

    def set_row(self, position: int, row: Sequence[Any]) -> None:
        _, _, valid_from, valid_to, deleted_at, created_at, trust, kind, updated_at = row
        self.valid_from[position] = valid_from
        self.updated_at[position] = updated_at
        self.valid_to[position] = OPEN if valid_to is None else valid_to
        self.created_at[position] = created_at
        self.live[position] = deleted_at is None
        self.present[position] = True
        self.trust[position] = self.code("trust", trust)
        self.kind[position] = self.code("kind", kind)

    def put(self, position: int, row: Sequence[Any], members: Members) -> None:
        """A record's row (read with ``COLUMNS``) and what it is listed under now."""
        self.set_row(position, row)
        self.forget_members(position)
        self.add_members(position, *members)

    def forget_members(self, position: int) -> None:
        tags, pairs = self.held.pop(position, ([], []))
        for tag in tags:
            self.tags[tag].remove(position)
        for key, value, _ in pairs:
            self.meta[(key, value)].remove(position)

    def add_members(self, position: int, tags: list[str], pairs: list[Pair]) -> None:
        for tag in tags:
            self.tags.setdefault(tag, Posting()).add(position, None)
        for key, value, number in pairs:
            self.meta.setdefault((key, value), Posting()).add(position, number)
            self.values.setdefault(key, set()).add(value)
        if tags or pairs:
            self.held[position] = (tags, pairs)

    # -- the scope ------------------------------------------------------------------

    def _pair(self, key: str, value: str) -> np.ndarray:
        posting = self.meta.get((key, value))
        return posting.array() if posting is not None else np.zeros(0, np.int64)

    def _pairs(self, key: str, keep: Callable[[str], bool]) -> np.ndarray:
        parts = [self._pair(key, value) for value in self.values.get(key, ()) if keep(value)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _predicate(self, predicate: Predicate) -> np.ndarray:
        key, values = predicate.key, predicate.values
        if predicate.op in NUMERIC_OPS:
            bound, compare = predicate.number(), _NUMERIC[predicate.op]
            parts = []
            for value in self.values.get(key, ()):
                posting = self.meta[(key, value)]
                array = posting.array()
                if array.shape[0]:
                    # NaN (no number) compares false, as SQL's NULL does
                    parts.append(array[compare(posting.numbers(), bound)])
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if predicate.op == Op.EQ:
            return self._pair(key, values[0])
        if predicate.op == Op.NEQ:
            return self._pairs(key, lambda value: value != values[0])
        wanted = set(values)
        return self._pairs(key, lambda value: value in wanted)

    def positions(
        self,
        request: SearchRequest,
        window: Window | None,
        known_at: int | None = None,
        among: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """Positions of the records in scope (with ``known_at``: those of them whose
        current version was recorded by then; ``among``: of these positions only,
        each once, the others never tested), or None when a term is not one this copy
        holds (the caller then asks SQL)."""
        lists = [
            *(self.tags[t].array() if t in self.tags else np.zeros(0, np.int64)
              for t in request.tags),
            *(self._pair(key, value) for key, value in request.filter.items()),
            *(self._predicate(p) for p in request.predicates),
        ]  # fmt: skip
        if among is not None:
            lists.append(among)
        candidates: np.ndarray | None = None
        if lists:
            lists.sort(key=len)
            candidates = lists[0]
            for other in lists[1:]:
                if candidates.shape[0] == 0:
                    break
                marks = np.zeros(self.count, bool)
                marks[other] = True
                candidates = candidates[marks[candidates]]

        def col(name: str) -> np.ndarray:
            column = self.column(name)
            assert column is not None
            return column if candidates is None else column[candidates]

        keep = col("present").copy()
        if known_at is not None:
            keep &= col("updated_at") <= known_at
        if window is not None:
            keep &= col("live")
            keep &= col("valid_from") < window.end
            keep &= col("valid_to") > window.start
        for column, op, value in request.record_terms():
            if column not in ("kind", "trust", "created_at"):
                return None
            if column in self.codes:
                code = self.codes[column].get(value)
                if code is None:
                    return np.zeros(0, np.int64)
                value = code
            keep &= _COMPARE[op](col(column), value)
        chosen = np.flatnonzero(keep)
        return chosen if candidates is None else candidates[chosen]


def members_of(tags: Iterable[Sequence[Any]], meta: Iterable[Sequence[Any]]) -> dict[int, Members]:
    """What each record is listed under, from its ``(record, tag)`` rows and its
    ``(record, key, value, number)`` metadata rows, as either backend reads them."""
    members: dict[int, Members] = {}
    for record, tag in tags:
        members.setdefault(record, ([], []))[0].append(tag)
    for record, key, value, number in meta:
        members.setdefault(record, ([], []))[1].append((key, value, number))
    return members


def row_columns(rows: Sequence[Sequence[Any]]) -> dict[str, np.ndarray]:
    """The columns of records rows read with ``COLUMNS`` in bulk, as ``Tenant`` holds
    them (trust and kind, coded per tenant, are the caller's)."""
    n = len(rows)
    return {
        "rowid": np.fromiter((r[0] for r in rows), np.int64, n),
        "valid_from": np.fromiter((r[2] for r in rows), np.int64, n),
        "valid_to": np.fromiter((OPEN if r[3] is None else r[3] for r in rows), np.int64, n),
        "live": np.fromiter((r[4] is None for r in rows), bool, n),
        "created_at": np.fromiter((r[5] for r in rows), np.int64, n),
        "updated_at": np.fromiter((r[8] for r in rows), np.int64, n),
        "present": np.ones(n, bool),
    }

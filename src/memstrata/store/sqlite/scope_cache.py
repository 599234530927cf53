"""The vector lane's scope on SQLite, decided in memory: a columnar copy of the scope
columns of every record, per namespace, with inverted lists for tags and metadata.

Scoring the in-scope vectors costs a gather and a matvec; deciding which rows are in
scope by SQL cost several times that (a row per record handed from the engine). So each
process keeps, like the vector matrix (:mod:`memstrata.store.sqlite.vectors`), a
read-through copy of the columns a scope tests — validity, tombstone, creation time,
trust, kind — and of the tag and metadata rows, refreshed inside the search's own read
transaction from ``scope_log`` (a trigger appends a record's rowid on every insert,
update and delete of its row). The database stays the only truth: the copy is built
from the file on a process's ``WARM_AFTER``-th search and rebuilt after any large
change. Building it reads every record's scope rows, which costs more than one SQL
scope: a process that searches once or twice (a CLI call) never builds it.

A search this copy cannot answer (a key, or any request field it does not know) is
answered by the SQL scope (:func:`scope_rowids`) instead. For a ``known_at`` search it
decides the current half (the rows already recorded then, by ``updated_at``); the
replaced versions are read from SQL.
The rules are the SQL scope's, written here over arrays; the temporal oracle test
(tests/store/test_temporal_oracle.py) checks both against one brute-force model.
"""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from memstrata.domain.search import NUMERIC_OPS, Op, Predicate, SearchRequest
from memstrata.domain.time import Window
from memstrata.store.sql.dialect import chunks

#: Request fields the copy answers; a request setting any other falls back to SQL.
SERVED = frozenset(
    {
        "query", "query_vector", "top_k", "ranking", "candidate_k", "kind", "tags",
        "filter", "predicates", "created_after", "created_before", "min_trust", "as_of",
        "between", "include_historical", "expand", "ids_only", "include_payload",
        "include_vector", "require_complete", "known_at",
    }
)  # fmt: skip
_OPEN = np.iinfo(np.int64).max  # a NULL valid_to: open-ended
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
}  # fmt: skip
_NUMERIC = {Op.GT: operator.gt, Op.GTE: operator.ge, Op.LT: operator.lt, Op.LTE: operator.le}
_COLUMNS = "rowid, namespace, valid_from, valid_to, deleted_at, created_at, trust, kind, updated_at"
_RELOAD_SHARE = 4  # more changes than 1/4 of the copy: reload it whole (one scan)
_CHUNK = 65536
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


class _Posting:
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


class _Tenant:
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
        self.tags: dict[str, _Posting] = {}
        self.meta: dict[tuple[str, str], _Posting] = {}
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
        self.valid_to[position] = _OPEN if valid_to is None else valid_to
        self.created_at[position] = created_at
        self.live[position] = deleted_at is None
        self.present[position] = True
        self.trust[position] = self.code("trust", trust)
        self.kind[position] = self.code("kind", kind)

    def forget_members(self, position: int) -> None:
        tags, pairs = self.held.pop(position, ([], []))
        for tag in tags:
            self.tags[tag].remove(position)
        for key, value, _ in pairs:
            self.meta[(key, value)].remove(position)

    def add_members(self, position: int, tags: list[str], pairs: list[Pair]) -> None:
        for tag in tags:
            self.tags.setdefault(tag, _Posting()).add(position, None)
        for key, value, number in pairs:
            self.meta.setdefault((key, value), _Posting()).add(position, number)
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
        self, request: SearchRequest, window: Window | None, known_at: int | None = None
    ) -> np.ndarray | None:
        """Positions of the records in scope (with ``known_at``: those of them whose
        current version was recorded by then), or None when a term is not one this
        copy holds (the caller then asks SQL)."""
        lists = [
            *(self.tags[t].array() if t in self.tags else np.zeros(0, np.int64)
              for t in request.tags),
            *(self._pair(key, value) for key, value in request.filter.items()),
            *(self._predicate(p) for p in request.predicates),
        ]  # fmt: skip
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


class ScopeCache:
    """Per-process columnar copies of every namespace's scope, kept in step with the
    file through ``scope_log``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._searches = 0
        self.warm_after = WARM_AFTER  # tests set 1: the copy from the first search
        self._reset()

    def _reset(self) -> None:
        self.seq = -1  # nothing loaded
        self.tenants: dict[str, _Tenant] = {}
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.tenant_of = np.full(1024, -1, np.int32)  # rowid -> namespace index
        self.position_of = np.full(1024, -1, np.int64)  # rowid -> position in it
        self.size = 0

    def rowids(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        request: SearchRequest,
        at: Window | None,
        known_at: int | None = None,
    ) -> np.ndarray | None:
        """The rowids of every record in the search's scope (``known_at``: of every
        current row in it recorded by then), or None when this copy cannot decide it
        (the caller asks SQL). Call inside the search's read."""
        if not served(request):
            return None
        with self._lock:
            if self.seq < 0:
                self._searches += 1
                if self._searches < self.warm_after:
                    return None
            self._refresh(conn)
            tenant = self.tenants.get(namespace)
            if tenant is None:
                return np.zeros(0, np.int64)
            positions = tenant.positions(request, at, known_at)
            return None if positions is None else tenant.rowid[positions]

    # -- refresh ----------------------------------------------------------------------

    def _refresh(self, conn: sqlite3.Connection) -> None:
        changes, top = conn.execute(
            "SELECT count(*), max(seq) FROM scope_log WHERE seq > ?", (self.seq,)
        ).fetchone()
        if self.seq >= 0 and not changes:
            return
        if self.seq < 0 or changes * _RELOAD_SHARE > self.size:
            self._reset()
            self._load(conn)
        else:
            rowids = sorted(
                {row[0] for row in conn.execute(
                    "SELECT record FROM scope_log WHERE seq > ?", (self.seq,))}
            )  # fmt: skip
            for chunk in chunks(rowids, 500):
                self._apply(conn, chunk)
        self.seq = top or 0

    def _members(
        self, conn: sqlite3.Connection, where: str, params: list[Any]
    ) -> dict[int, Members]:
        members: dict[int, Members] = {}
        for record, tag in conn.execute(f"SELECT record, tag FROM record_tags{where}", params):
            members.setdefault(record, ([], []))[0].append(tag)
        for record, key, value, number in conn.execute(
            f"SELECT record, key, value, num FROM record_meta{where}", params
        ):
            members.setdefault(record, ([], []))[1].append((key, value, number))
        return members

    def _apply(self, conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
        """Loads the scope rows of ``rowids`` from the file; those gone are dropped."""
        marks = ", ".join("?" for _ in rowids)
        rows = conn.execute(f"SELECT {_COLUMNS} FROM records WHERE rowid IN ({marks})", rowids)
        seen = self._put(rows, self._members(conn, f" WHERE record IN ({marks})", list(rowids)))
        self._drop(set(rowids) - seen)

    def _load(self, conn: sqlite3.Connection) -> None:
        """Loads every record: the columns in bulk, a chunk of rows at a time."""
        cursor = conn.execute(f"SELECT {_COLUMNS} FROM records")
        while rows := cursor.fetchmany(_CHUNK):
            n = len(rows)
            rowid = np.fromiter((r[0] for r in rows), np.int64, n)
            spaces = np.fromiter((self._namespace(r[1]) for r in rows), np.int32, n)
            columns = {
                "rowid": rowid,
                "valid_from": np.fromiter((r[2] for r in rows), np.int64, n),
                "valid_to": np.fromiter((_OPEN if r[3] is None else r[3] for r in rows),
                                        np.int64, n),
                "live": np.fromiter((r[4] is None for r in rows), bool, n),
                "created_at": np.fromiter((r[5] for r in rows), np.int64, n),
                "updated_at": np.fromiter((r[8] for r in rows), np.int64, n),
                "present": np.ones(n, bool),
            }  # fmt: skip
            for index in np.unique(spaces):
                tenant = self.tenants[self.names[index]]
                chosen = np.flatnonzero(spaces == index)
                start = tenant.count
                tenant.grow(start + chosen.shape[0])
                tenant.count += chosen.shape[0]
                stop = tenant.count
                for name, values in columns.items():
                    getattr(tenant, name)[start:stop] = values[chosen]
                for name, at in (("trust", 6), ("kind", 7)):
                    getattr(tenant, name)[start:stop] = [
                        tenant.code(name, rows[i][at]) for i in chosen
                    ]
                self._place(rowid[chosen], index, np.arange(start, stop))
        for record, (tags, pairs) in self._members(conn, "", []).items():
            tenant = self.tenants[self.names[self.tenant_of[record]]]
            tenant.add_members(int(self.position_of[record]), tags, pairs)

    def _namespace(self, name: str) -> int:
        index = self.index.get(name)
        if index is None:
            index = self.index[name] = len(self.names)
            self.names.append(name)
            self.tenants[name] = _Tenant()
        return index

    def _place(self, rowids: np.ndarray, tenant: int, positions: np.ndarray) -> None:
        top = int(rowids.max()) if rowids.shape[0] else 0
        if top >= self.tenant_of.shape[0]:
            size = max(top + 1, 2 * self.tenant_of.shape[0])
            for name in ("tenant_of", "position_of"):
                old = getattr(self, name)
                new = np.full(size, -1, old.dtype)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        self.tenant_of[rowids] = tenant
        self.position_of[rowids] = positions
        self.size += rowids.shape[0]

    def _slot(self, rowid: int, namespace: str) -> tuple[_Tenant, int]:
        if rowid < self.tenant_of.shape[0] and self.tenant_of[rowid] >= 0:
            tenant = self.tenants[self.names[self.tenant_of[rowid]]]
            return tenant, int(self.position_of[rowid])
        index = self._namespace(namespace)
        tenant = self.tenants[namespace]
        position = tenant.count
        tenant.grow(position + 1)
        tenant.count += 1
        tenant.rowid[position] = rowid
        self._place(np.array([rowid]), index, np.array([position]))
        return tenant, position

    def _put(
        self,
        rows: Iterable[Sequence[Any]],
        members: dict[int, Members],
    ) -> set[int]:
        seen = set()
        for row in rows:
            rowid = row[0]
            seen.add(rowid)
            tenant, position = self._slot(rowid, row[1])
            tenant.set_row(position, row)
            tenant.forget_members(position)
            tags, pairs = members.get(rowid, ([], []))
            tenant.add_members(position, tags, pairs)
        return seen

    def _drop(self, rowids: Iterable[int]) -> None:
        """Records no longer in the file (hard-deleted): never in scope again (a rowid
        is never reused)."""
        for rowid in rowids:
            if rowid < self.tenant_of.shape[0] and self.tenant_of[rowid] >= 0:
                tenant = self.tenants[self.names[self.tenant_of[rowid]]]
                position = int(self.position_of[rowid])
                tenant.present[position] = False
                tenant.forget_members(position)

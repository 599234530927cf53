"""The vector lane's scope on SQLite, decided in memory: a columnar copy of the scope
columns of every record, per namespace, with inverted lists for tags and metadata.

Scoring the in-scope vectors costs a gather and a matvec; deciding which rows are in
scope by SQL cost several times that (a row per record handed from the engine). So each
process keeps, like the vector matrix (:mod:`erstwhile.store.sqlite.vectors`), a
read-through copy of the columns a scope tests — validity, tombstone, creation time,
trust, kind — and of the tag and metadata rows, refreshed inside the search's own read
transaction from ``scope_log`` (a record's rowid is appended by the insert of its
row, and by a trigger on every update and delete of it; each lexical merge prunes it
to its newest entries, :mod:`erstwhile.store.sqlite.change_log`). The database stays the
only truth: the copy is built from the file on a process's ``WARM_AFTER``-th search
and rebuilt after any large change. Building it reads every record's scope rows,
which costs more than one SQL scope: a process that searches once or twice (a CLI
call) never builds it.

A search this copy cannot answer (a key, or any request field it does not know) is
answered by the SQL scope (:func:`scope_rowids`) instead. For a ``known_at`` search it
decides the current half (the rows already recorded then, by ``updated_at``); the
replaced versions are read from SQL.
The rules over the columns are shared with the other backends
(:mod:`erstwhile.store.sql.scope_copy`); the temporal oracle test
(tests/store/test_temporal_oracle.py) checks them against one brute-force model.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import Window
from erstwhile.store.sql.dialect import chunks
from erstwhile.store.sql.scope_copy import (
    COLUMNS,
    OPEN,
    SERVED,
    WARM_AFTER,
    Members,
    Tenant,
    members_of,
    row_columns,
    served,
)
from erstwhile.store.sqlite.change_log import changes_since, records_since

_RELOAD_SHARE = 4  # more changes than 1/4 of the copy: reload it whole (one scan)
_CHUNK = 65536

__all__ = ["SERVED", "WARM_AFTER", "ScopeCache", "served"]


#: Decided scopes kept for reuse, at most this many and this many bytes of rowids.
_HELD_SCOPES = 64
_HELD_BYTES = 64 << 20


def _scope_key(namespace: str, request: SearchRequest, known_at: int | None) -> tuple[Any, ...]:
    """Every term of a served request that decides its scope, but its window."""
    return (
        namespace, tuple(request.tags), tuple(sorted(request.filter.items())),
        tuple(repr(p) for p in request.predicates), tuple(request.record_terms()), known_at,
    )  # fmt: skip


def _next_change(tenant: Tenant, at: Window | None) -> int:
    """For a point window at ``t``: the first instant after ``t`` at which any of the
    namespace's records becomes or stops being valid (its scope at every instant from
    ``t`` until then is the scope at ``t``). Other windows: reused only when equal."""
    if at is None or at.end != at.start + 1:
        return at.end if at is not None else OPEN
    starts, ends = tenant.column("valid_from"), tenant.column("valid_to")
    assert starts is not None and ends is not None
    later = [a[a > at.start] for a in (starts, ends)]
    return min((int(a.min()) for a in later if a.shape[0]), default=OPEN)


class _Held:
    """A decided scope: its window, until when it holds (a point window), its rowids."""

    __slots__ = ("at", "rowids", "until")

    def __init__(self, at: Window | None, until: int, rowids: np.ndarray) -> None:
        self.at, self.until, self.rowids = at, until, rowids

    def answers(self, at: Window | None) -> bool:
        if at is None or self.at is None:
            return at is None and self.at is None
        if at.end == at.start + 1 and self.at.end == self.at.start + 1:  # two instants
            return self.at.start <= at.start < self.until
        return at == self.at


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
        self.tenants: dict[str, Tenant] = {}
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.tenant_of = np.full(1024, -1, np.int32)  # rowid -> namespace index
        self.position_of = np.full(1024, -1, np.int64)  # rowid -> position in it
        self.size = 0
        # scopes decided since the copy last changed, by request terms: a search that
        # repeats one (the same room, current) reuses its rowids while no record's
        # validity starts or ends between the two instants
        self._held: OrderedDict[tuple[Any, ...], _Held] = OrderedDict()
        self._held_bytes = 0

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
        with self._lock:
            if not self._serves(request):
                return None
            self._refresh(conn)
            tenant = self.tenants.get(namespace)
            if tenant is None:
                return np.zeros(0, np.int64)
            key = _scope_key(namespace, request, known_at)
            held = self._held.get(key)
            if held is not None and held.answers(at):
                self._held.move_to_end(key)
                return held.rowids
            positions = tenant.positions(request, at, known_at)
            if positions is None:
                return None
            rowids = tenant.rowid[positions]
            self._hold(key, _Held(at, _next_change(tenant, at), rowids))
            return rowids

    def _serves(self, request: SearchRequest) -> bool:
        """Whether the copy decides this search: one it knows, once the process has
        searched ``warm_after`` times (a one-shot process keeps the SQL scope). Call
        with the lock held."""
        if not served(request):
            return False
        if self.seq < 0:
            self._searches += 1
            if self._searches < self.warm_after:
                return False
        return True

    def _hold(self, key: tuple[Any, ...], held: _Held) -> None:
        """Keeps a decided scope, the least recently used ones dropped past the bounds."""
        held.rowids.flags.writeable = False  # shared by every search that reuses it
        self._held[key] = held
        self._held_bytes += held.rowids.nbytes
        while len(self._held) > _HELD_SCOPES or self._held_bytes > _HELD_BYTES:
            _, dropped = self._held.popitem(last=False)
            self._held_bytes -= dropped.rowids.nbytes

    def tester(
        self, conn: sqlite3.Connection, namespace: str, request: SearchRequest, at: Window | None
    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """When this copy decides the search's scope: a test of given rowids (those in
        scope; only they are tested), for a lane that finds its candidates first (the
        lexical lane: the records with a posting). None: the caller asks SQL. Call
        inside the search's read; the copy is refreshed here."""
        with self._lock:
            if not self._serves(request):
                return None
            self._refresh(conn)

        def test(rowids: np.ndarray) -> np.ndarray | None:
            with self._lock:
                tenant = self.tenants.get(namespace)
                if tenant is None:
                    return np.zeros(0, np.int64)
                among = self._positions_in(namespace, rowids)
                positions = tenant.positions(request, at, among=among)
                return None if positions is None else tenant.rowid[positions]

        return test

    def _positions_in(self, namespace: str, rowids: np.ndarray) -> np.ndarray:
        """The positions, in ``namespace``'s tenant, of those of ``rowids`` it holds."""
        inside = rowids[(rowids >= 0) & (rowids < self.tenant_of.shape[0])]
        mine = inside[self.tenant_of[inside] == self.index[namespace]]
        # each once, in order: marks over the namespace (a hash of the few rowids a
        # lexical lane hands over cost more)
        marks = np.zeros(self.tenants[namespace].count, bool)
        marks[self.position_of[mine]] = True
        return np.flatnonzero(marks)

    # -- refresh ----------------------------------------------------------------------

    def _refresh(self, conn: sqlite3.Connection) -> None:
        changes, top, pruned = changes_since(conn, self.seq)
        if self.seq >= 0 and not changes:
            return
        self._held.clear()  # every decided scope may have changed
        self._held_bytes = 0
        if self.seq < 0 or pruned or changes * _RELOAD_SHARE > self.size:
            self._reset()
            self._load(conn)
        else:
            rowids = sorted(records_since(conn, self.seq))
            for chunk in chunks(rowids, 500):
                self._apply(conn, chunk)
        self.seq = top or 0

    def _members(
        self, conn: sqlite3.Connection, where: str, params: list[Any]
    ) -> dict[int, Members]:
        return members_of(
            conn.execute(f"SELECT record, tag FROM record_tags{where}", params),
            conn.execute(f"SELECT record, key, value, num FROM record_meta{where}", params),
        )

    def _apply(self, conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
        """Loads the scope rows of ``rowids`` from the file; those gone are dropped."""
        marks = ", ".join("?" for _ in rowids)
        rows = conn.execute(f"SELECT {COLUMNS} FROM records WHERE rowid IN ({marks})", rowids)
        seen = self._put(rows, self._members(conn, f" WHERE record IN ({marks})", list(rowids)))
        self._drop(set(rowids) - seen)

    def _load(self, conn: sqlite3.Connection) -> None:
        """Loads every record: the columns in bulk, a chunk of rows at a time."""
        cursor = conn.execute(f"SELECT {COLUMNS} FROM records")
        while rows := cursor.fetchmany(_CHUNK):
            spaces = np.fromiter((self._namespace(r[1]) for r in rows), np.int32, len(rows))
            columns = row_columns(rows)
            rowid = columns["rowid"]
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
            self.tenants[name] = Tenant()
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

    def _slot(self, rowid: int, namespace: str) -> tuple[Tenant, int]:
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
            tenant.put(position, row, members.get(rowid, ([], [])))
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

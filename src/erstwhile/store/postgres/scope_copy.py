"""The vector lane on PostgreSQL, answered from memory when nothing has changed: a
per-process copy of each searched namespace's scope columns (the shared
:class:`~erstwhile.store.sql.scope_copy.Tenant`) and a float32 matrix of its vectors
per (embedder, dimensions), kept in step through the change tracking of migration
m009 (each row's writing ``xid``, the drop logs of hard deletes).

The database stays the only truth. A copy holds the state of one snapshot (its
``pg_snapshot``). A search decides its scope and ranks it in memory, then sends one
statement that both asks whether anything in the namespace is newer than the copy's
snapshot (a row or a drop whose ``xid`` is not visible in it, or a pruned drop log)
and fetches the hits' records. When nothing is, the
answer stands: the records, and the copy's view of the namespace, are those of the
statement's own snapshot. Otherwise the search runs again in a REPEATABLE READ
transaction: its first statement takes that transaction's snapshot, the copy applies
every row and drop whose ``xid`` the old snapshot does not see, and the answer and
its records come from that same transaction. "Not seen" is the snapshot's own rule
(:func:`unseen`): at least its ``xmax``, or one of the transactions it lists as in
flight (``xip``): the same rows as "``xid`` >= ``xmin`` and not visible", found by
index lookups that are empty while nothing changes, however far back a long
transaction elsewhere holds ``xmin``. A transaction still in flight at the new
snapshot is in its ``xip`` and is picked up by a later refresh once it commits.

The copy of a namespace is built on its ``WARM_AFTER``-th search (a CLI call that
searches once keeps the SQL lane), holds about ``4 * dimensions`` bytes per vector,
and answers only what the shared rules serve (:func:`served`) and no ``known_at``
search; the rest goes to SQL (:mod:`erstwhile.store.postgres.vectors`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from erstwhile.domain.records import Record
from erstwhile.store.postgres.connection import Connection, Database
from erstwhile.store.sql.dialect import Lane
from erstwhile.store.sql.rows import best, hits, prefixed
from erstwhile.store.sql.scope_copy import (
    COLUMNS,
    WARM_AFTER,
    Members,
    Tenant,
    members_of,
    row_columns,
    served,
)
from erstwhile.store.sql.scoring import rescored, scores_at, top_k


class Matrix:
    """One (embedder, dimensions)'s unit vectors, row = the record's position in the
    namespace's Tenant."""

    def __init__(self, dimensions: int) -> None:
        self.rows = np.zeros((64, dimensions), np.float32)
        self.has = np.zeros(64, bool)

    def grow(self, need: int) -> None:
        size = self.rows.shape[0]
        if need <= size:
            return
        size = max(need, 2 * size)
        rows = np.zeros((size, self.rows.shape[1]), np.float32)
        rows[: self.rows.shape[0]] = self.rows
        has = np.zeros(size, bool)
        has[: self.has.shape[0]] = self.has
        self.rows, self.has = rows, has

    def put(self, positions: np.ndarray, vectors: np.ndarray) -> None:
        if positions.shape[0]:
            self.grow(int(positions.max()) + 1)
            self.rows[positions] = vectors
            self.has[positions] = True

    def drop(self, positions: np.ndarray) -> None:
        positions = positions[positions < self.has.shape[0]]
        self.has[positions] = False


@dataclass
class Copy:
    """One namespace as of one snapshot."""

    tenant: Tenant = field(default_factory=Tenant)
    position: dict[int, int] = field(default_factory=dict)  # rowid -> position
    snapshot: str = ""  # pg_snapshot text
    xmin: str = "0"  # its xmin, xmax and in-flight list (xid8 text)
    xmax: str = "0"
    xip: str = "{}"
    check: str = ""  # changed_query() for this snapshot
    matrices: dict[tuple[str, int], Matrix] = field(default_factory=dict)

    def positions_of(self, rowids: Iterable[int]) -> np.ndarray:
        found = [self.position[r] for r in rowids if r in self.position]
        return np.asarray(found, dtype=np.int64)


def unseen(column: str = "xid") -> str:
    """Whether ``column`` names a transaction a snapshot did not see (parameters: its
    xmax, its in-flight list as an array's text)."""
    return f"({column} >= %s::xid8 OR {column} = ANY (%s::text::xid8[]))"


def changed_query(copy: Copy) -> str:
    """Whether anything a search reads is newer than the copy's snapshot (parameters:
    per table the namespace, for vectors then the embedder, twice; the namespace for
    the pruned drop logs). Two lookups per table, so the index serves each. The
    snapshot's xids are written into the text (digits parsed from its own
    ``pg_snapshot``, never input): a plan of constants, the same for every search
    until the copy next refreshes — as parameters, PostgreSQL's generic plan for the
    prepared statement, chosen after five runs, scanned the namespace (4x slower)."""
    xmax, xmin = int(copy.xmax), int(copy.xmin)
    xip = ",".join(str(int(x)) for x in copy.xip.strip("{}").split(",") if x)
    tests = []
    vector = " AND embedder_id = %s"
    for table, embedder in (("records", ""), ("vectors", vector), ("record_drops", ""),
                            ("vector_drops", vector)):  # fmt: skip
        tests.append(f"EXISTS (SELECT 1 FROM {table} WHERE namespace = %s{embedder}"
                     f" AND xid >= '{xmax}'::xid8)")  # fmt: skip
        if xip:
            tests.append(f"EXISTS (SELECT 1 FROM {table} WHERE namespace = %s{embedder}"
                         f" AND xid = ANY ('{{{xip}}}'::xid8[]))")  # fmt: skip
    tests.append(
        f"EXISTS (SELECT 1 FROM drop_horizon WHERE namespace = %s AND below >= '{xmin}'::xid8)"
    )
    return " OR ".join(tests)


def _changed_params(namespace: str, embedder_id: str, copy: Copy) -> list[Any]:
    times = 2 if copy.xip != "{}" else 1
    per_table = [namespace] * times + [namespace, embedder_id] * times
    return [*per_table, *per_table, namespace]


class ScopeCopies:
    """Every searched namespace's copy in this process."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.enabled = True  # False: every search by SQL (tests of the SQL lane, the bench)
        self.warm_after = WARM_AFTER  # tests set 1: the copy from the first search
        self._lock = threading.Lock()
        self._searches: dict[str, int] = {}
        self._copies: dict[str, Copy] = {}

    def nbytes(self) -> int:
        """The arrays the copies hold (not counting the dicts of tags and metadata)."""
        with self._lock:
            total = 0
            for copy in self._copies.values():
                tenant = copy.tenant
                total += sum(getattr(tenant, name).nbytes for name in Tenant._ARRAYS)
                total += sum(m.rows.nbytes + m.has.nbytes for m in copy.matrices.values())
            return total

    def semantic(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int] | None:
        """The vector lane's answer from the copy, or None when it does not serve this
        search (the caller asks SQL)."""
        if not self.enabled or lane.known_at is not None or not served(lane.request):
            return None
        namespace, dimensions = lane.namespace, int(query.shape[0])
        fast: tuple[dict[int, float], int] | None = None
        with self._lock:
            copy = self._copies.get(namespace)
            if copy is None:
                seen = self._searches[namespace] = self._searches.get(namespace, 0) + 1
                if seen < self.warm_after:
                    return None
            elif (embedder_id, dimensions) in copy.matrices:
                fast = self._rank(copy, lane, embedder_id, query)
                if fast is None:
                    return None
                # the search reads the records and this embedder's vectors only
                changed, changed_params = copy.check, _changed_params(namespace, embedder_id, copy)
        if fast is not None:
            chosen, unembedded = fast
            with self.db.connection() as conn:
                rows = conn.execute(
                    f"WITH c AS (SELECT {changed} AS changed) SELECT c.changed,"
                    f" {prefixed('r')} FROM c LEFT JOIN records r ON NOT c.changed"
                    " AND r.namespace = %s AND r.rowid = ANY (%s)",
                    [*changed_params, namespace, list(chosen)],
                ).fetchall()  # fmt: skip
            if not rows[0][0]:  # the copy is this statement's snapshot: the answer stands
                found = [row[1:] for row in rows if row[1] is not None]
                return self._answer(found, lane, chosen), unembedded
        # built, refreshed, or given this embedder's matrix: in one snapshot, answered in it
        with self.db.snapshot() as conn, self._lock:
            copy = self._refresh(conn, namespace, embedder_id, dimensions)
            ranked = self._rank(copy, lane, embedder_id, query)
            if ranked is None:
                return None
            chosen, unembedded = ranked
            found = conn.execute(
                f"SELECT {prefixed('r')} FROM records r WHERE r.namespace = %s"
                " AND r.rowid = ANY (%s)",
                [namespace, list(chosen)],
            ).fetchall()
        return self._answer(found, lane, chosen), unembedded

    @staticmethod
    def _answer(
        rows: Sequence[Sequence[Any]], lane: Lane, chosen: dict[int, float]
    ) -> list[tuple[Record, float]]:
        return best(hits(rows, lane.request, lambda row: chosen[row[0]]), lane.limit)

    @staticmethod
    def _rank(
        copy: Copy, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[dict[int, float], int] | None:
        """(similarity by rowid of the best and those tied with the last, in-scope
        records without a vector); None when the scope is not one the copy decides."""
        tenant = copy.tenant
        positions = tenant.positions(lane.request, lane.window)
        if positions is None:
            return None
        matrix = copy.matrices[(embedder_id, int(query.shape[0]))]
        matrix.grow(tenant.count)
        embedded = positions[matrix.has[positions]]
        unembedded = int(positions.shape[0] - embedded.shape[0])
        if embedded.shape[0] == 0:
            return {}, unembedded
        query = query.astype(np.float32)
        similarities = scores_at(matrix.rows, tenant.count, embedded, query)
        best = embedded[top_k(similarities, lane.limit)]
        scores = rescored(matrix.rows[best], query)  # ties by id: scoring.rescored
        return dict(zip(tenant.rowid[best].tolist(), scores.tolist(), strict=True)), unembedded

    # -- refresh ------------------------------------------------------------------------

    def _refresh(self, conn: Connection, namespace: str, embedder_id: str, dimensions: int) -> Copy:
        """The namespace's copy brought to this transaction's snapshot (built whole the
        first time, or when a drop it needs was pruned), with a matrix for the embedder."""
        taken = conn.execute("SELECT s::text FROM pg_current_snapshot() s").fetchone()
        assert taken is not None
        snapshot = taken[0]
        xmin, xmax, listed = snapshot.split(":")
        copy = self._copies.get(namespace)
        if copy is not None:
            pruned = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM drop_horizon WHERE namespace = %s"
                " AND below >= %s::xid8)",
                [namespace, copy.xmin],
            ).fetchone()
            if pruned and pruned[0]:  # a delete it would need to hear of is gone from the log
                copy = None
        if copy is None:
            copy = Copy()
            _load(conn, namespace, copy)
        else:
            _apply(conn, namespace, copy)
        copy.snapshot, copy.xmin, copy.xmax, copy.xip = snapshot, xmin, xmax, f"{{{listed}}}"
        copy.check = changed_query(copy)
        if (embedder_id, dimensions) not in copy.matrices:
            matrix = copy.matrices[(embedder_id, dimensions)] = Matrix(dimensions)
            _load_vectors(conn, namespace, copy, embedder_id, dimensions, matrix)
        self._copies[namespace] = copy
        return copy


def _members(conn: Connection, namespace: str, rowids: list[int] | None) -> dict[int, Members]:
    where, params = " WHERE namespace = %s", [namespace]
    if rowids is not None:
        where, params = where + " AND record = ANY (%s)", [namespace, rowids]  # type: ignore[list-item]
    return members_of(
        conn.execute(f"SELECT record, tag FROM record_tags{where}", params),
        conn.execute(f"SELECT record, key, value, num FROM record_meta{where}", params),
    )


def _load(conn: Connection, namespace: str, copy: Copy) -> None:
    """Every record of the namespace, the columns in bulk."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM records WHERE namespace = %s", [namespace]
    ).fetchall()
    tenant, n = copy.tenant, len(rows)
    tenant.grow(n)
    tenant.count = n
    columns = {
        **row_columns(rows),
        "trust": np.fromiter((tenant.code("trust", r[6]) for r in rows), np.int32, n),
        "kind": np.fromiter((tenant.code("kind", r[7]) for r in rows), np.int32, n),
    }
    for name, values in columns.items():
        getattr(tenant, name)[:n] = values
    copy.position = {int(r): i for i, r in enumerate(columns["rowid"].tolist())}
    for record, (tags, pairs) in _members(conn, namespace, None).items():
        tenant.add_members(copy.position[record], tags, pairs)


def _apply(conn: Connection, namespace: str, copy: Copy) -> None:
    """Every change since the copy's snapshot: rows written (or rewritten) by any
    transaction it did not see, then the records and vectors deleted since."""
    since = [namespace, copy.xmax, copy.xip]
    tenant = copy.tenant
    gone = [r for (r,) in conn.execute(
        f"SELECT record FROM record_drops WHERE namespace = %s AND {unseen()}", since
    )]  # fmt: skip
    for position in copy.positions_of(gone).tolist():
        tenant.present[position] = False
        tenant.forget_members(position)
        for matrix in copy.matrices.values():
            matrix.drop(np.array([position]))
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM records WHERE namespace = %s AND {unseen()}", since
    ).fetchall()
    if rows:
        members = _members(conn, namespace, [row[0] for row in rows])
        for row in rows:
            position = copy.position.get(row[0])
            if position is None:
                position = copy.position[row[0]] = tenant.count
                tenant.grow(position + 1)
                tenant.count += 1
                tenant.rowid[position] = row[0]
            tenant.put(position, row, members.get(row[0], ([], [])))
    for (embedder_id, dimensions), matrix in copy.matrices.items():
        dropped = [r for (r,) in conn.execute(
            "SELECT record FROM vector_drops WHERE namespace = %s AND embedder_id = %s"
            f" AND {unseen()}", [namespace, embedder_id, copy.xmax, copy.xip])]  # fmt: skip
        matrix.drop(copy.positions_of(dropped))
        # a vector written since replaces the drop: it is the row there now
        _load_vectors(conn, namespace, copy, embedder_id, dimensions, matrix, copy)


def _load_vectors(
    conn: Connection, namespace: str, copy: Copy, embedder_id: str, dimensions: int,
    matrix: Matrix, since: Copy | None = None,
) -> None:  # fmt: skip
    """The embedder's vectors of the namespace (``since``: those written by a
    transaction the copy's snapshot did not see) into the matrix, by binary COPY:
    fixed-width rows read as one array."""
    newer = "" if since is None else f" AND {unseen()}"
    params: list[Any] = [namespace, embedder_id, dimensions]
    if since is not None:
        params += [since.xmax, since.xip]
    statement = (
        "COPY (SELECT record, embedding FROM vectors WHERE namespace = %s"
        f" AND embedder_id = %s AND dimensions = %s{newer}) TO STDOUT (FORMAT binary)"
    )
    with conn.raw.cursor() as cursor, cursor.copy(statement, params) as stream:
        data = b"".join(bytes(block) for block in stream)
    # 19 bytes of header, a 2-byte trailer; each row: field count, then per field its
    # length and value (bigint; pgvector's dim, unused, float4 x dim), big-endian
    layout = np.dtype([
        ("fields", ">i2"), ("l1", ">i4"), ("record", ">i8"), ("l2", ">i4"),
        ("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", (dimensions,)),
    ])  # fmt: skip
    body = data[19:-2]
    if not body:
        return
    rows = np.frombuffer(body, dtype=layout)
    positions = copy.positions_of(rows["record"].tolist())
    if positions.shape[0] != rows.shape[0]:  # the same snapshot: every vector has its record
        raise RuntimeError("scope copy: a vector without its record in the same snapshot")
    matrix.put(positions, rows["values"].astype(np.float32))

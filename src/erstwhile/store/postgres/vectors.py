"""The vector lane on PostgreSQL: exact for small scopes, HNSW with iterative scans
for large ones, and a true pre-filter either way.

Vectors live in one ``vectors`` table, unit length, as untyped ``vector``; a
dimension gets a partial HNSW index over ``embedding::vector(N)`` (or ``halfvec(N)``
past pgvector's 2,000-dimension limit for ``vector``) when a search first needs one
(see :class:`VectorIndexes`). The index uses inner product, which on unit vectors
orders exactly as cosine does and gives the same similarity the SQLite lane computes
(stored unit vector · query vector).

A search reads its scope's rowids once, into an array inside the statement
(:func:`scope_ranked`). A scope of at most ``exact_limit`` records is ranked exactly
in that statement: its vectors are found by rowid (one walk of the primary key
along the sorted array), every one scored, ties by id, and the best returned with
their records. A larger scope, up to the dialect's ``SCOPE_ROWS``, comes back as the
array's text and is handed to the HNSW index as a constant (a hashed filter:
:func:`scope_approximate`); one larger still is counted whole and filtered by its own
clauses during the scan (:func:`approximate`). Either way ``hnsw.iterative_scan``
applies the filter while the index is read and the scan goes on until ``top_k``
in-scope rows are found; if it still comes back short (``hnsw.max_scan_tuples``
reached on a very selective scope), the lane falls back to the exact ranking. So a
search never returns fewer than ``top_k`` in-scope hits when that many exist.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from erstwhile.domain.errors import StorageUnavailable
from erstwhile.store.postgres.arrays import array
from erstwhile.store.postgres.connection import Connection, connect
from erstwhile.store.sql.scoring import TIE_BAND, rescored

log = logging.getLogger("erstwhile.store.postgres")

#: pgvector's HNSW limits: vector up to 2,000 dimensions, halfvec up to 4,000.
VECTOR_INDEX_MAX = 2000
HALFVEC_INDEX_MAX = 4000
#: Index build parameters (pgvector's defaults).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: maintenance_work_mem of a build's own session: the graph built in memory is
#: several times faster than one that spills (measured: docs/postgres.md)
BUILD_MEMORY = "512MB"


def index_type(dimensions: int) -> str | None:
    """The type the HNSW index of this dimension casts to (None: too large to index)."""
    if dimensions <= VECTOR_INDEX_MAX:
        return "vector"
    if dimensions <= HALFVEC_INDEX_MAX:
        return "halfvec"
    return None


def _dimensions(value: int) -> int:
    dimensions = int(value)
    if not 1 <= dimensions <= 16000:  # pgvector's own limit for a vector
        raise ValueError(f"vector dimension {dimensions} is outside 1..16000")
    return dimensions


def index_expression(dimensions: int) -> str | None:
    """``embedding::vector(N)`` — an integer rendered from our own code, never input."""
    kind = index_type(dimensions)
    return None if kind is None else f"(v.embedding::{kind}({_dimensions(dimensions)}))"


class VectorIndexes:
    """Each dimension's HNSW index: built once, off the search path.

    Until a scope holds more than ``exact_limit`` embedded records no search reads an
    index, so none is kept: a store that never grows that large never pays for one,
    and a bulk load into an empty store runs without it. The first search that would
    use it starts the build on a thread of its own (``CREATE INDEX CONCURRENTLY``:
    writers carry on) and is answered exactly, as every search is until the index is
    valid; so is the next, until then. An advisory lock makes one process the
    builder; an index left invalid by an interrupted build is dropped and built again.
    From then on PostgreSQL keeps it current on every write. :meth:`ensure` builds
    one now and waits (after a bulk import). :meth:`close` stops a build under way (its
    statement cancelled: the index it leaves invalid is dropped and built again by the
    next) and waits for it to end, so nothing of the store holds a lock once closed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._ready: set[int] = set()
        self._building: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False
        #: The builds under way: each one's thread and its own connection, once open.
        self._threads: set[threading.Thread] = set()
        self._connections: set[Any] = set()

    def ready(self, conn: Connection, dimensions: int) -> bool:
        """Whether the dimension's index exists and is valid (a catalog read)."""
        if dimensions in self._ready:
            return True
        if _state(conn, dimensions) is True:
            self._ready.add(dimensions)
            return True
        return False

    def start(self, dimensions: int) -> None:
        """Builds the dimension's index on a background thread (once at a time)."""
        dimensions = _dimensions(dimensions)
        with self._lock:
            if self._closed or dimensions in self._building or dimensions in self._ready:
                return
            self._building.add(dimensions)

        def build() -> None:
            try:
                self._build(dimensions, wait=False)
            except Exception as error:  # searches stay exact meanwhile; say why
                if not self._closed:  # else cancelled by close(): nothing went wrong
                    log.warning("building the HNSW index of dimension %s failed: %s",
                                dimensions, error)  # fmt: skip
            finally:
                with self._lock:
                    self._building.discard(dimensions)
                    self._threads.discard(thread)

        thread = threading.Thread(target=build, name=f"erstwhile-hnsw-{dimensions}", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def ensure(self, dimensions: int) -> None:
        """Builds the dimension's index unless it exists, and waits for it. Call it
        outside any open transaction of this process: a concurrent build waits for
        those to end."""
        self._build(_dimensions(dimensions), wait=True)

    def _build(self, dimensions: int, *, wait: bool) -> None:
        kind = index_type(dimensions)
        if kind is None:
            return
        # a connection of its own: no statement timeout, room for the build's graph
        with connect(self.url) as raw, self._open(raw):
            conn = Connection(raw)
            if self.ready(conn, dimensions):
                return
            conn.execute("SET statement_timeout = 0")
            conn.execute(  # at least BUILD_MEMORY; a server configured for more keeps it
                "SELECT set_config('maintenance_work_mem', CASE WHEN"
                " pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)"
                " THEN %s ELSE current_setting('maintenance_work_mem') END, false)",
                (BUILD_MEMORY, BUILD_MEMORY),
            )
            lock = "hashtextextended(current_schema() || 'erstwhile.vectors', 0)"
            if wait:
                conn.execute(f"SELECT pg_advisory_lock({lock})".encode())
            else:
                got = conn.execute(f"SELECT pg_try_advisory_lock({lock})".encode()).fetchone()
                if not got or not got[0]:
                    return  # another process is building it
            try:
                state = _state(conn, dimensions)
                name = f"vectors_hnsw_{dimensions}"
                if state is False:  # an interrupted build left it invalid
                    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}".encode())
                if state is not True:
                    # DDL takes no bind parameters: N is an int checked above
                    conn.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON vectors USING hnsw"
                        f" ((embedding::{kind}({dimensions})) {kind}_ip_ops)"
                        f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                        f" WHERE dimensions = {dimensions}".encode()
                    )
            finally:
                conn.execute(f"SELECT pg_advisory_unlock({lock})".encode())
            self._ready.add(dimensions)

    @contextmanager
    def _open(self, raw: Any) -> Iterator[None]:
        """Lists a build's connection while it is open (for :meth:`close` to cancel)."""
        with self._lock:
            if self._closed:
                raise StorageUnavailable("the store is closed: no index is built")
            self._connections.add(raw)
        try:
            yield
        finally:
            with self._lock:
                self._connections.discard(raw)

    def close(self) -> None:
        """Stops every build under way and waits for it: its statement is cancelled
        (again, until its thread ends: one may start the next statement meanwhile)."""
        with self._lock:
            self._closed = True
        while True:
            with self._lock:
                threads = [t for t in self._threads if t.is_alive()]
                connections = list(self._connections)
            if not threads and not connections:
                return
            for raw in connections:
                raw.cancel_safe()
            for thread in threads:
                thread.join(0.1)
            if not threads:  # an ensure() of another thread: it ends with its statement
                time.sleep(0.01)


def _state(conn: Connection, dimensions: int) -> bool | None:
    """True: the index is valid; False: it exists but is invalid; None: no index."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid ="
        " to_regclass(quote_ident(current_schema()) || '.' || %s)",
        (f"vectors_hnsw_{int(dimensions)}",),
    ).fetchone()
    return None if row is None else bool(row[0])


#: The best rows of a ``scored`` (record, similarity) CTE, as ``b``: the ``limit``
#: highest (the next parameter) by a bounded sort (top-N, not a sort of the whole
#: scope), then every row within ``TIE_BAND`` of the last of them: near ties at the
#: edge come along (the caller settles them, :func:`settled`, and breaks ties by id).
_BEST = (
    "top AS (SELECT similarity FROM scored ORDER BY similarity DESC LIMIT %s),"
    " b AS (SELECT record, similarity FROM scored"
    f" WHERE similarity >= (SELECT min(similarity) FROM top) - {TIE_BAND!r})"
)


def settled(
    conn: Connection, namespace: str, embedder_id: str, query: np.ndarray,
    scores: dict[int, float],
) -> dict[int, float]:  # fmt: skip
    """``scores`` (similarity by rowid, as pgvector computed them) with each run of
    scores within ``TIE_BAND`` of one another computed again as the in-process copies
    compute them (:func:`~erstwhile.store.sql.scoring.rescored`) where they are not all
    equal. pgvector sums in float32, so two different vectors of the same cosine can
    come out an ulp apart, in the other order than the copy's (which then ranks them
    by id); scores further apart than the band keep their order whichever way they are
    computed, and scores equal here (identical vectors, mostly) already rank by id. So
    a search of real embeddings reads nothing more; one with ulp-apart scores reads
    just those vectors."""
    if len(scores) < 2:
        return scores
    ranked = sorted(scores.items(), key=lambda item: item[1])
    close: set[int] = set()
    run = [ranked[0]]
    for item in [*ranked[1:], None]:
        if item is not None and item[1] - run[-1][1] < TIE_BAND:
            run.append(item)
            continue
        if run[-1][1] != run[0][1]:  # a run of near ties, not all equal
            close.update(rowid for rowid, _ in run)
        if item is not None:
            run = [item]
    if not close:
        return scores
    rows = conn.execute(
        "SELECT record, embedding FROM vectors WHERE namespace = %s AND embedder_id = %s"
        " AND dimensions = %s AND record = ANY (%s)",
        [namespace, embedder_id, int(query.shape[0]), array(sorted(close))],
    ).fetchall()
    if not rows:
        return scores
    again = rescored(np.stack([row[1].to_numpy() for row in rows]).astype(np.float32), query)
    return {**scores, **{int(row[0]): float(score) for row, score in zip(rows, again, strict=True)}}


def _settings(ef_search: int | None) -> tuple[str, list[Any]]:
    """A select-list entry that applies :func:`iterative_scan`'s settings as the
    statement runs (local to the transaction): the statements after it plan with them."""
    if ef_search is None:
        return "", []
    return f", ({SCAN_SETTINGS}) AS settings", [str(ef_search)]


def exact_query(
    namespace: str,
    scope: str,
    scope_params: list[Any],
    embedder_id: str,
    query: np.ndarray,
    limit: int,
    scope_limit: int | None = None,
    ef_search: int | None = None,
) -> tuple[str, list[Any]]:
    """Every in-scope vector scored, in one statement. One row per chosen record:
    (in-scope count, embedded count, rowid, similarity), the best ``limit`` by
    similarity plus any tied with the last (the caller breaks ties by id, which it
    reads with the rows). A scope with no vector still gives one row of counts.

    With ``scope_limit``, a scope larger than that is counted (its records and those
    with a vector, from the vectors' key alone) and nothing is scored: the counts
    the index lane needs, from the same pass over the scope. With ``ef_search``, the
    statement also makes this transaction's HNSW scans iterative (:data:`SCAN_SETTINGS`),
    for the index statement that follows it: no round trip of their own."""
    within = "" if scope_limit is None else " WHERE (SELECT total FROM c) <= %s"
    checks = [] if scope_limit is None else [scope_limit]
    settings, setting_params = _settings(ef_search)
    joined = (
        " JOIN vectors v ON v.namespace = %s AND v.record = s.record"
        " AND v.embedder_id = %s AND v.dimensions = %s"
    )
    vector = [namespace, embedder_id, int(query.shape[0])]
    return (
        f"WITH s AS MATERIALIZED (SELECT * FROM ({scope}) q),"
        " c AS MATERIALIZED (SELECT (SELECT count(*) FROM s) AS total,"
        f" (SELECT count(*) FROM s{joined}) AS embedded{settings}),"
        " scored AS MATERIALIZED (SELECT s.record, -(v.embedding <#> %b) AS similarity"
        f" FROM s{joined}{within}), {_BEST}"
        " SELECT c.total, c.embedded, b.record, b.similarity FROM c LEFT JOIN b ON TRUE",
        [*scope_params, *vector, *setting_params, query, *vector, *checks, limit],
    )  # fmt: skip


def approximate_query(
    namespace: str,
    columns: str,
    where: str,
    params: list[Any],
    embedder_id: str,
    query: np.ndarray,
    limit: int,
) -> tuple[str, list[Any]] | None:
    """The nearest in-scope rows by the dimension's HNSW index, the scope filtered
    during the scan (None when the dimension has no index). Run it after
    :func:`iterative_scan`; its rows come in relaxed order."""
    dimensions = int(query.shape[0])
    expression = index_expression(dimensions)
    kind = index_type(dimensions)
    if expression is None or kind is None:
        return None
    return (
        f"SELECT {columns}, -(v.embedding <#> %b) AS similarity FROM vectors v"
        " JOIN records r ON r.namespace = v.namespace AND r.rowid = v.record"
        f" WHERE v.namespace = %s AND v.embedder_id = %s AND v.dimensions = %s AND {where}"
        f" ORDER BY {expression} <#> %b::{kind} LIMIT %s",
        [query, namespace, embedder_id, dimensions, *params, query, limit],
    )


def _by_rowids(namespace: str, embedder_id: str, query: np.ndarray) -> tuple[str, list[Any]]:
    """The vectors of the records whose rowids are the next parameter (an array's
    text, as :func:`scope_ranked` gave it: a constant of the plan, so a filter over
    it is a hashed look-up): a scan of the vectors' primary key, which walks the
    sorted array along its leaves."""
    return (
        " FROM vectors v WHERE v.namespace = %s AND v.embedder_id = %s AND v.dimensions = %s"
        " AND v.record = ANY (%s::bigint[])",
        [namespace, embedder_id, int(query.shape[0])],
    )


def scope_exact(
    conn: Connection, namespace: str, rowids: str, embedder_id: str, query: np.ndarray,
    limit: int,
) -> tuple[int, dict[int, float]]:  # fmt: skip
    """Every vector of the given records scored, in one statement: (how many of them
    have a vector, similarity by rowid of the best ``limit`` and any tied with the last)."""
    vectors_of, params = _by_rowids(namespace, embedder_id, query)
    rows = conn.execute(
        f"WITH scored AS MATERIALIZED (SELECT v.record, -(v.embedding <#> %b) AS similarity"
        f"{vectors_of}), {_BEST} SELECT (SELECT count(*) FROM scored), b.record, b.similarity"
        " FROM (SELECT 1) one LEFT JOIN b ON TRUE",
        [query, *params, rowids, limit],
    ).fetchall()  # fmt: skip
    chosen = {int(row[1]): float(row[2]) for row in rows if row[1] is not None}
    return int(rows[0][0]), chosen


def scope_approximate(
    conn: Connection, namespace: str, rowids: str, embedder_id: str, query: np.ndarray,
    limit: int, ef_search: int | None,
) -> tuple[int, dict[int, float]] | None:  # fmt: skip
    """The nearest of the given records by the dimension's HNSW index, in relaxed
    order, the rowids tested during the scan (a hashed array: one look-up per row the
    index yields): (how many of them have a vector, similarity by rowid of the
    ``limit`` found). None when the dimension has no index. ``ef_search`` None: the
    transaction's scans are iterative already (a statement before applied the settings)."""
    dimensions = int(query.shape[0])
    expression, kind = index_expression(dimensions), index_type(dimensions)
    if expression is None or kind is None:
        return None
    vectors_of, params = _by_rowids(namespace, embedder_id, query)
    if ef_search is not None:
        iterative_scan(conn, ef_search)
    rows = conn.execute(
        f"SELECT (SELECT count(*){vectors_of}), n.record, n.similarity FROM (SELECT 1) one"
        f" LEFT JOIN (SELECT v.record, -(v.embedding <#> %b) AS similarity{vectors_of}"
        f" ORDER BY {expression} <#> %b::{kind} LIMIT %s) n ON TRUE",
        [*params, rowids, query, *params, rowids, query, limit],
    ).fetchall()  # fmt: skip
    chosen = {int(row[1]): float(row[2]) for row in rows if row[1] is not None}
    return int(rows[0][0]), chosen


def scope_ranked(
    conn: Connection, namespace: str, scope: str, scope_params: list[Any], embedder_id: str,
    query: np.ndarray, limit: int, *, exact_limit: int, most: int, columns: str,
    ef_search: int | None = None,
) -> tuple[int, int, str | None, list[tuple[Any, ...]]]:  # fmt: skip
    """One statement: the scope read once (at most ``most`` + 1 rowids), and if it
    holds at most ``exact_limit`` records, every vector of theirs scored, found by
    rowid (a walk of the vectors' primary key along the sorted array), and the best
    ``limit`` (and any tied with the last) returned with their records' ``columns``.
    With ``ef_search``, it also applies :data:`SCAN_SETTINGS` for the index statement
    that may follow in the same transaction.

    Returns (in-scope count, embedded count, the rowids as an array's text when the
    scope is larger than ``exact_limit`` but not than ``most``, rows: ``columns``
    then similarity)."""
    vectors_of, params = _by_rowids(namespace, embedder_id, query)
    vectors_of = vectors_of.replace("%s::bigint[]", "CAST((SELECT rowids FROM a) AS bigint[])")
    settings, setting_params = _settings(ef_search)
    rows = conn.execute(
        f"WITH s AS MATERIALIZED (SELECT record FROM ({scope}) q LIMIT %s),"
        " a AS MATERIALIZED (SELECT count(*) AS total,"
        f" coalesce(array_agg(record), '{{}}') AS rowids{settings} FROM s),"
        f" scored AS MATERIALIZED (SELECT v.record, -(v.embedding <#> %b) AS similarity"
        f"{vectors_of} AND (SELECT total FROM a) <= %s), {_BEST}"
        " SELECT a.total, (SELECT count(*) FROM scored),"
        " CASE WHEN a.total > %s AND a.total <= %s THEN a.rowids::text END,"
        f" {columns}, b.similarity FROM a LEFT JOIN b ON TRUE"
        " LEFT JOIN records r ON r.namespace = %s AND r.rowid = b.record",
        [*scope_params, most + 1, *setting_params, query, *params, exact_limit, limit,
         exact_limit, most, namespace],
    ).fetchall()  # fmt: skip
    first = rows[0]
    found = [row[3:] for row in rows if row[3] is not None]
    return int(first[0]), int(first[1]), first[2], found


def iterative_scan(conn: Connection, ef_search: int) -> None:
    """This transaction's HNSW scans go on until enough rows pass the filters. The
    settings are local to the transaction (a pooled session keeps nothing), and its
    statements are planned afresh: a generic plan the driver prepared earlier could
    have been chosen without the index."""
    conn.execute(f"SELECT {SCAN_SETTINGS}", (str(ef_search),))


#: :func:`iterative_scan`'s settings as one expression (the parameter: ef_search).
#: The count has decided for the index; the planner, which cannot see how few rows
#: the LIMIT needs from a scan in relaxed order, would rather sort the scope (exactly,
#: at the exact lane's cost). No sort leaves it the index's order.
SCAN_SETTINGS = (
    "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
    " || set_config('hnsw.ef_search', %s, true)"
    " || set_config('plan_cache_mode', 'force_custom_plan', true)"
    " || set_config('enable_sort', 'off', true)"
)


def plain_sort(conn: Connection) -> None:
    """Sorting allowed again in this transaction (after :func:`iterative_scan`)."""
    conn.execute("SELECT set_config('enable_sort', 'on', true)")


def exact(
    conn: Connection,
    namespace: str,
    scope: str,
    scope_params: list[Any],
    embedder_id: str,
    query: np.ndarray,
    limit: int,
    scope_limit: int | None = None,
    ef_search: int | None = None,
) -> tuple[int, int, dict[int, float]]:
    """:func:`exact_query` run: (in-scope count, embedded count, similarity by rowid
    of the best ``limit`` and any tied with the last)."""
    rows = conn.execute(
        *exact_query(
            namespace, scope, scope_params, embedder_id, query, limit, scope_limit, ef_search
        )
    ).fetchall()
    chosen = {int(row[2]): float(row[3]) for row in rows if row[2] is not None}
    return int(rows[0][0]), int(rows[0][1]), chosen


def approximate(
    conn: Connection,
    namespace: str,
    columns: str,
    where: str,
    params: list[Any],
    embedder_id: str,
    query: np.ndarray,
    limit: int,
    ef_search: int | None,
) -> list[tuple[Any, ...]] | None:
    """:func:`approximate_query` run, re-sorted by similarity, ties by id.
    ``ef_search`` None: a statement before applied :data:`SCAN_SETTINGS`."""
    built = approximate_query(namespace, columns, where, params, embedder_id, query, limit)
    if built is None:
        return None
    if ef_search is not None:
        iterative_scan(conn, ef_search)
    rows = conn.execute(*built).fetchall()
    rows.sort(key=lambda row: (-row[-1], row[2]))  # columns start rowid, namespace, id
    return rows

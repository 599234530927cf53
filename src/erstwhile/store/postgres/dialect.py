"""The PostgreSQL dialect: pgvector (HNSW, iterative scans) for the vector lane, a
connection pool, row locks and key claims. The lexical lane is the shared one
(:mod:`erstwhile.store.sql.lexical`): the same BM25 scores as on SQLite.

Every statement names its namespace, which is what lets the tables distribute by
namespace on Citus: opened on a Citus coordinator the store places its tables itself
(:mod:`erstwhile.store.postgres.citus`, docs/postgres.md "On Citus"), and only the
inspections that read every namespace say so (:meth:`PostgresDialect.every_shard`).
"""

from __future__ import annotations

import hashlib
import logging
import struct
import threading
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.adapt import Dumper
from psycopg.pq import Format

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record
from erstwhile.domain.time import now_us
from erstwhile.store import StorageOptions
from erstwhile.store.postgres import arrays, citus, vectors
from erstwhile.store.postgres.arrays import array, text_array
from erstwhile.store.postgres.connection import Connection, Database, connect
from erstwhile.store.postgres.migrations import UNCHAINED, apply_migrations
from erstwhile.store.postgres.scope_copy import ScopeCopies
from erstwhile.store.sql.dialect import Dialect, Lane
from erstwhile.store.sql.maintenance import Finding
from erstwhile.store.sql.past import known_rows
from erstwhile.store.sql.rows import ROW_FIELDS, best, hits, prefixed
from erstwhile.store.sql.scope import known_scope, scope_clause, scope_rowids

log = logging.getLogger("erstwhile.store.postgres")

#: Scopes with at most this many embedded records are ranked exactly; larger ones
#: use the HNSW index (measured: bench/backends.py, docs/postgres.md).
EXACT_LIMIT = 10_000
#: Scopes of at most this many records are read whole into the search (their rowids):
#: the vectors are then found by rowid, and the index scan tests a hashed array
#: instead of the scope's filters (measured: bench/backends.py, docs/postgres.md).
SCOPE_ROWS = 20_000
#: The HNSW lane reads OVERFETCH x top_k rows, with at least this ef_search.
OVERFETCH = 4
EF_SEARCH = 200

# rowids are drawn from the identity's sequence up front (reserve_rowids), so an
# insert needs no RETURNING and a whole batch's rows go out in a few statements
_RECORD_COLUMNS = ("rowid", *ROW_FIELDS)
_ROW_VALUES = itemgetter(*ROW_FIELDS)
_VECTOR_COLUMNS = ("namespace", "record", "embedder_id", "dimensions", "embedding")
_VECTOR_UPSERT = (
    " ON CONFLICT (namespace, record, embedder_id) DO UPDATE SET"
    " dimensions = excluded.dimensions, embedding = excluded.embedding"
)
# one statement for the rows of a hard-deleted record no foreign key cascades from
_FORGET = (
    "WITH "
    + ", ".join(
        f"{table} AS (DELETE FROM {table} WHERE namespace = %(namespace)s AND record = %(rowid)s)"
        for table in UNCHAINED[:-1]
    )
    + f" DELETE FROM {UNCHAINED[-1]} WHERE namespace = %(namespace)s AND record = %(rowid)s"
)
# every column but the namespace, which the WHERE pins: on Citus it is the distribution
# column, and an UPDATE that sets it (even to its own value) is refused
_UPDATE = (
    "UPDATE records SET "
    + ", ".join(f"{name} = %({name})s" for name in ROW_FIELDS if name != "namespace")
    + " WHERE namespace = %(namespace)s AND rowid = %(rowid)s"
)

# A write's changes to its namespace's term counts, at its end. Writers of a namespace
# run side by side (they share its language: hold_language), so two may count the same
# term, even one that is new to both: each row is inserted or, when there is one, its
# count added to under its row lock, term after term in the terms' order (ORDER BY the
# array's, which is sorted), so no two writers wait for each other in a cycle. The lock
# lasts until the write commits: the count's short final update.
_TERM_COUNTS = (
    "INSERT INTO lexical_terms (namespace, term, df) SELECT %s, d.term, d.df"
    " FROM unnest(%b::text[], %b::integer[]) WITH ORDINALITY AS d (term, df, n) ORDER BY d.n"
    " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df"
)
# The namespace's language, shared by its writers or taken whole by a change of it: an
# advisory lock (one request queue, so a change is not starved by writers that keep
# coming), on two keys (never one of claim_key's), per schema and namespace.
_HOLD_LANGUAGE = (
    "SELECT pg_advisory_xact_lock{}(hashtext('erstwhile.lexical'),"
    " hashtext(current_schema() || '.' || %s))"
)


def _vector_key(row: Sequence[Any]) -> Any:
    return row[:3]  # (namespace, record, embedder_id): a later vector replaces it


class PackedVector(bytes):
    """A vector already in pgvector's binary form (its dimensions, a zero, then the
    big-endian float4 values): what the server reads, made by numpy in one step
    instead of pgvector's own dumper converting it again for every row."""

    __slots__ = ()


_HEADER = struct.Struct(">HH")


def packed(unit: np.ndarray) -> PackedVector:
    return PackedVector(_HEADER.pack(unit.shape[0], 0) + unit.astype(">f4").tobytes())


class _PackedDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: PackedVector) -> bytes:
        return obj


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)
    arrays.register(conn)
    info = conn.adapters.types.get("vector")
    assert info is not None  # register_vector found it, or raised
    # the oid lets COPY's set_types and %b arrays find it
    dumper = type("PackedVectorDumper", (_PackedDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(PackedVector, dumper)


def _last(row: Sequence[Any]) -> float:
    """The score a lane's statement selects after the record columns."""
    return float(row[-1])


def _md5(value: str) -> str:
    return hashlib.md5(value.encode("utf-8"), usedforsecurity=False).hexdigest()


class FreshStatistics:
    """ANALYZEs the tables after this process's first writes, at 500, 1,000, 2,000, …
    rows. Autovacuum gathers statistics too, but only every minute or so: a store
    loaded and searched within that minute would be planned as if its tables held
    one row each — nested loops that cost seconds at a few thousand rows.

    From :data:`BACKGROUND_FROM` rows on the tables already have statistics (the
    planner scales them by the tables' sizes meanwhile), and one ANALYZE samples
    30,000 rows of every table, over a second at 50,000 records under load: those
    run on a thread of their own, one at a time, and the write that made one due
    returns without waiting for it (bench/backends.py: ingest).

    Of ``records`` only the columns a statement tests, joins or sorts on are
    analyzed: the free text (content, metadata, tags, supersedes, source) and the
    payload were half the cost of its ANALYZE (130 -> 66 ms at 50k records), and
    no plan reads their statistics. ``lexical_docs`` (39 ms) is read by its primary
    key only. Autovacuum's own ANALYZEs, once they come, cover every column."""

    TABLES = (
        "records (namespace, rowid, id, kind, key, trust, origin, created_at, updated_at,"
        " valid_from, valid_to, deleted_at, superseded_by, version, content_hash, xid),"
        " record_tags, record_meta, vectors, lexical_postings, lexical_terms"
    )
    FIRST = 500
    BACKGROUND_FROM = 8_000
    LAST = 2_000_000  # past this, autovacuum's own thresholds are what matter

    def __init__(self) -> None:
        self._written = 0
        self._due = self.FIRST
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False  # another became due while one ran

    def wrote(self, db: Database, rows: int) -> None:
        with self._lock:
            self._written += rows
            if self._written < self._due or self._due > self.LAST:
                return
            background = self._due >= self.BACKGROUND_FROM
            self._due *= 2
            if background:
                if self._thread is not None and self._thread.is_alive():
                    self._again = True
                    return
                self._thread = threading.Thread(
                    target=self._analyze_until_done, args=(db,), name="erstwhile-analyze",
                    daemon=True,
                )  # fmt: skip
                self._thread.start()
                return
        self._analyze(db)

    def _analyze_until_done(self, db: Database) -> None:
        while True:
            self._analyze(db)
            with self._lock:
                if not self._again:
                    return
                self._again = False

    def _analyze(self, db: Database) -> None:
        try:
            with db.connection() as conn:
                conn.execute(f"ANALYZE {self.TABLES}")
        except Exception as error:  # statistics help; their absence is not an error
            log.warning("ANALYZE after the first writes failed: %s", error)

    def close(self) -> None:
        """Waits for an ANALYZE under way (before the pool it uses closes)."""
        thread = self._thread
        if thread is not None:
            thread.join()


class PostgresDialect(Dialect):
    """What the PostgreSQL store does its own way (pgvector 0.8 or later).

    ``url`` is a libpq URL; its ``options=-csearch_path=…`` selects a schema."""

    name = "postgres"
    request_threads = 40  # anyio's default: a request mostly waits on the server
    true = "TRUE"
    membership = "exists"
    lock_for_update = " FOR UPDATE"
    lock_for_share = " FOR SHARE"
    lexical_documents = True  # m011: lexical_postings has no index by record

    def __init__(
        self, url: str, *, options: StorageOptions | None = None, exact_limit: int = EXACT_LIMIT
    ) -> None:
        self.url = url
        self.exact_limit = exact_limit
        options = options or StorageOptions()
        with connect(url) as conn:
            #: a Citus coordinator (citus.py): the tables distributed by namespace
            self.citus = citus.active(Connection(conn))
            apply_migrations(Connection(conn), now_us(), on_citus=self.citus)
        self.db: Database = Database(
            url, max_size=options.pool_size, timeout=options.pool_timeout,
            statement_timeout=options.statement_timeout, configure=_configure,
            literal_copies=self.citus,
        )  # fmt: skip
        self._indexes = vectors.VectorIndexes(url)
        self._statistics = FreshStatistics()
        self.copies = ScopeCopies(self.db)  # the lane from memory (scope_copy.py)
        # on Citus no change tracking tells a copy what changed: every search by SQL
        self.copies.enabled = not self.citus

    def every_shard(self, tx: Connection) -> None:
        if self.citus:
            # a cluster set to refuse statements on many shards (as the tests' is:
            # citus.multi_task_query_log_level) lets this transaction's through
            tx.execute("SET LOCAL citus.multi_task_query_log_level = off")

    # -- wording ------------------------------------------------------------------

    def text_equals(self, column: str, value: str) -> tuple[str, list[Any]]:
        # md5 first, so an index holds text of any length; then the exact text
        return f"md5({column}) = md5(?) AND {column} = ?", [value, value]

    def text_in(self, column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        return (
            f"md5({column}) = ANY (?::text[]) AND {column} = ANY (?::text[])",
            [text_array([_md5(v) for v in values]), array(values)],
        )

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY (?)", [array(values)]

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::jsonb ->> '{key}')"

    def truncated(self, expression: str) -> str:
        # a whole float8: sums of them are exact (below 2**53) in any order
        return f"trunc({expression})"

    def records_join(
        self,
        alias: str,
        driver: str,
        *,
        table: str = "records",
        column: str = "rowid",
        index: str | None = None,
    ) -> str:
        return (
            f"JOIN {table} {alias} ON {alias}.namespace = {driver}.namespace"
            f" AND {alias}.{column} = {driver}.record"
        )

    def has_vector(self, vectors: str, records: str) -> str:
        return (
            f"{vectors}.namespace = {records}.namespace AND {vectors}.record = {records}.rowid"
            f" AND {vectors}.embedder_id = ?"
        )

    # -- writes ---------------------------------------------------------------------

    def reserve_rowids(self, tx: Connection, count: int) -> list[int]:
        # the sequence found once (an InitPlan), not once per row: 0.2 ms for 1,000
        # rowids where the catalog look-up in every row took 7.8 ms (EXPLAIN ANALYZE)
        rows = tx.execute(
            "SELECT nextval((SELECT pg_get_serial_sequence('records', 'rowid')::regclass))"
            " FROM generate_series(1, %s)",
            (count,),
        ).fetchall()
        rowids = [row[0] for row in rows]
        tx.fresh.update(rowids)
        return rowids

    def insert_rows(
        self, tx: Connection, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
        suffix: str = "", *, change: int = 0, distinct: bool = False,
    ) -> None:  # fmt: skip
        # every replacement here runs at once, after what waits: one order serves all
        # (and rows already go many to a statement, distinct or not)
        tx.defer(table, columns, rows, suffix=suffix)
        if suffix:  # rows that may meet each other's conflicts go now, in one statement
            tx.flush()

    def hold_language(self, tx: Connection, namespace: str, *, exclusive: bool = False) -> None:
        tx.execute(_HOLD_LANGUAGE.format("" if exclusive else "_shared"), (namespace,))

    def add_term_counts(
        self, tx: Connection, namespace: str, changed: Sequence[tuple[str, int]]
    ) -> None:
        tx.execute(_TERM_COUNTS, (
            namespace, text_array([term for term, _ in changed]), [delta for _, delta in changed],
        ))  # fmt: skip

    def insert_record(self, tx: Connection, rowid: int | None, values: dict[str, Any]) -> int:
        if rowid is None:
            rowid = self.reserve_rowids(tx, 1)[0]
        row = (rowid, *_ROW_VALUES(values))
        tx.defer("records", _RECORD_COLUMNS, [row], overriding=True)
        return rowid

    def update_record(self, tx: Connection, rowid: int, values: dict[str, Any]) -> None:
        tx.execute(_UPDATE, {**values, "rowid": rowid})

    def store_vector(
        self, tx: Connection, namespace: str, rowid: int, embedder_id: str, unit: np.ndarray
    ) -> None:
        row = (namespace, rowid, embedder_id, int(unit.shape[0]), packed(unit))
        if rowid in tx.fresh:  # a record of this transaction: nothing to conflict with
            tx.defer("vectors", _VECTOR_COLUMNS, [row], key=_vector_key)
        else:
            tx.defer("vectors", _VECTOR_COLUMNS, [row], suffix=_VECTOR_UPSERT, key=_vector_key,
                     name="vectors (replacing)")  # fmt: skip

    def withdraw_vectors(
        self, tx: Connection, namespace: str, *, rowid: int | None = None,
        embedder_id: str | None = None,
    ) -> int:  # fmt: skip
        column, value = ("record", rowid) if rowid is not None else ("embedder_id", embedder_id)
        return int(
            tx.execute(
                f"DELETE FROM vectors WHERE namespace = %s AND {column} = %s", (namespace, value)
            ).rowcount
        )

    def keep_vectors(self, tx: Connection, namespace: str, rowid: int, content_hash: str) -> None:
        tx.execute(
            "INSERT INTO past_vectors (namespace, record, content_hash, embedder_id, dimensions,"
            " embedding) SELECT namespace, record, %s, embedder_id, dimensions, embedding"
            " FROM vectors WHERE namespace = %s AND record = %s"
            " ON CONFLICT (namespace, record, content_hash, embedder_id) DO UPDATE SET"
            " dimensions = excluded.dimensions, embedding = excluded.embedding",
            (content_hash, namespace, rowid),
        )

    def claim_key(self, tx: Connection, namespace: str, key: str) -> None:
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{namespace}\x1f{key}",)
        )

    def forget_record(self, tx: Connection, namespace: str, rowid: int) -> None:
        tx.execute(_FORGET, {"namespace": namespace, "rowid": rowid})

    def wrote(self, rows: int) -> None:
        self._statistics.wrote(self.db, rows)

    # -- lanes ----------------------------------------------------------------------

    def _semantic_known(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int]:
        """Exact cosine over the records as known at ``lane.known_at``: a version whose
        content is the record's content now uses the current vector; one whose content
        has changed since uses the vector kept for it (``past_vectors``)."""
        assert lane.known_at is not None
        current, replaced = known_scope(
            self, "r", lane.namespace, lane.request, lane.window, lane.known_at
        )
        dimensions = int(query.shape[0])
        sql = (
            "WITH s AS MATERIALIZED ("
            f"SELECT r.rowid AS record, r.content_hash AS hash, TRUE AS same FROM records r"
            f" WHERE {current.where} UNION ALL"
            " SELECT r.record, r.content_hash, r.content_hash = c.content_hash FROM record_past r"
            " JOIN records c ON c.namespace = r.namespace AND c.rowid = r.record"
            f" WHERE {replaced.where}),"
            " scored AS (SELECT s.record, -(v.embedding <#> %b) AS similarity FROM s"
            " JOIN vectors v ON v.namespace = %s AND v.record = s.record AND v.embedder_id = %s"
            " AND v.dimensions = %s WHERE s.same UNION ALL"
            " SELECT s.record, -(v.embedding <#> %b) FROM s JOIN past_vectors v"
            " ON v.namespace = %s AND v.record = s.record AND v.content_hash = s.hash"
            " AND v.embedder_id = %s AND v.dimensions = %s WHERE NOT s.same)"
            " SELECT c.total, c.embedded, b.record, b.similarity FROM"
            " (SELECT (SELECT count(*) FROM s) AS total, (SELECT count(*) FROM scored)"
            " AS embedded) c LEFT JOIN (SELECT record, similarity,"
            " rank() OVER (ORDER BY similarity DESC) AS place FROM scored) b ON b.place <= %s"
        )
        params = [
            *current.params, *replaced.params,
            query, lane.namespace, embedder_id, dimensions,
            query, lane.namespace, embedder_id, dimensions, lane.limit,
        ]  # fmt: skip
        with self.db.snapshot() as conn:
            found = conn.execute(sql, params).fetchall()
            total, embedded = int(found[0][0]), int(found[0][1])
            chosen = {int(row[2]): float(row[3]) for row in found if row[2] is not None}
            rows = (
                known_rows(self, conn, lane.namespace, lane.known_at, list(chosen))
                if chosen else []
            )  # fmt: skip
        found_hits = hits(rows, lane.request, lambda row: chosen[row[0]])
        return best(found_hits, lane.limit), total - embedded

    def semantic(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int]:
        """From the process's copy of the namespace where it serves the search
        (scope_copy.py); else exact for scopes up to ``exact_limit``, the HNSW index
        beyond (vectors.py)."""
        query = np.asarray(query, dtype=np.float32)
        if lane.known_at is not None:
            return self._semantic_known(lane, embedder_id, query)
        copied = self.copies.semantic(lane, embedder_id, query)
        if copied is not None:
            return copied
        namespace, request, window, limit = lane.namespace, lane.request, lane.window, lane.limit
        dimensions = int(query.shape[0])
        scope, scope_params = scope_rowids(self, namespace, request, window)
        exact = min(self.exact_limit, SCOPE_ROWS)
        ef_search = min(1000, max(EF_SEARCH, OVERFETCH * limit))
        # One statement, which is its own snapshot: a scope ranked exactly (the common
        # case) costs a single round trip — no BEGIN, no COMMIT.
        with self.db.connection() as conn:
            total, embedded, _, ranked = vectors.scope_ranked(
                conn, namespace, scope, scope_params, embedder_id, query, limit,
                exact_limit=exact, most=SCOPE_ROWS, columns=prefixed("r"),
            )  # fmt: skip
            if total <= exact:  # ranked exactly, records and all
                return self._ranked(conn, lane, embedder_id, query, ranked), total - embedded
        # A larger scope: the statements that follow share one snapshot, which decides
        # again (a write may have moved the scope across a limit since).
        build = False
        with self.db.snapshot() as conn:
            rowids = None
            if total <= SCOPE_ROWS:
                total, embedded, rowids, ranked = vectors.scope_ranked(
                    conn, namespace, scope, scope_params, embedder_id, query, limit,
                    exact_limit=exact, most=SCOPE_ROWS, columns=prefixed("r"),
                    ef_search=ef_search,
                )  # fmt: skip
                if total <= exact:
                    settled = self._ranked(conn, lane, embedder_id, query, ranked)
                    return settled, total - embedded
            if rowids is not None:  # read whole: the index tests the rowids
                by_rowid = self._semantic_rowids(conn, lane, embedder_id, query, rowids)
                if by_rowid is None:
                    build = True  # started after this transaction; this search is exact
                    by_rowid = vectors.scope_exact(
                        conn, namespace, rowids, embedder_id, query, limit
                    )
                embedded, chosen = by_rowid
            else:
                # counted whole (the one pass over it), the index's settings applied
                total, embedded, chosen = vectors.exact(
                    conn, namespace, scope, scope_params, embedder_id, query, limit,
                    scope_limit=self.exact_limit, ef_search=ef_search,
                )  # fmt: skip
            if total > max(self.exact_limit, SCOPE_ROWS):
                # a large scope, counted whole: the index answers if enough is embedded
                if embedded == 0:
                    return [], total
                indexed = embedded > self.exact_limit and vectors.index_type(dimensions) is not None
                if indexed and not self._indexes.ready(conn, dimensions):
                    build = True  # started after this transaction; this search is exact
                elif indexed:
                    found = self._approximate(conn, lane, embedder_id, query)
                    if found is not None and len(found) >= min(limit, embedded):
                        return hits(found[:limit], request, _last), total - embedded
                # no index (yet), or it ran out before the scope did: rank exactly
                vectors.plain_sort(conn)
                total, embedded, chosen = vectors.exact(
                    conn, namespace, scope, scope_params, embedder_id, query, limit
                )
            chosen = vectors.settled(conn, namespace, embedder_id, query, chosen)
            rows = self._records(conn, namespace, chosen)
        if build:
            self._indexes.start(dimensions)
        return best(hits(rows, request, lambda row: chosen[row[0]]), limit), total - embedded

    @staticmethod
    def _ranked(
        conn: Connection, lane: Lane, embedder_id: str, query: np.ndarray,
        ranked: list[tuple[Any, ...]],
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """The best of an exact statement's rows (record columns, then similarity),
        near ties settled (:func:`vectors.settled`)."""
        scores = vectors.settled(
            conn, lane.namespace, embedder_id, query, {row[0]: _last(row) for row in ranked}
        )
        return best(hits(ranked, lane.request, lambda row: scores[row[0]]), lane.limit)

    @staticmethod
    def _records(conn: Connection, namespace: str, chosen: dict[int, float]) -> list[Any]:
        return conn.execute(
            f"SELECT {prefixed('r')} FROM records r WHERE r.namespace = %s AND r.rowid = ANY (%s)",
            [namespace, list(chosen)],
        ).fetchall()

    def _semantic_rowids(
        self, conn: Connection, lane: Lane, embedder_id: str, query: np.ndarray, rowids: str
    ) -> tuple[int, dict[int, float]] | None:
        """A scope larger than ``exact_limit`` read whole (``rowids``: the array's
        text), by the HNSW index, falling back to exact if the scan comes back short:
        (embedded count, similarity by rowid). None: the index is not built yet."""
        namespace, limit, dimensions = lane.namespace, lane.limit, int(query.shape[0])
        if vectors.index_type(dimensions) is None:
            return vectors.scope_exact(conn, namespace, rowids, embedder_id, query, limit)
        if not self._indexes.ready(conn, dimensions):
            return None
        found = vectors.scope_approximate(  # the settings came with the rowids
            conn, namespace, rowids, embedder_id, query, OVERFETCH * limit, ef_search=None
        )
        if found is not None:
            embedded, chosen = found
            if len(chosen) >= min(limit, embedded):
                best_ids = sorted(chosen, key=lambda rowid: (-chosen[rowid], rowid))[:limit]
                return embedded, {rowid: chosen[rowid] for rowid in best_ids}
        vectors.plain_sort(conn)
        return vectors.scope_exact(conn, namespace, rowids, embedder_id, query, limit)

    def _approximate(
        self, conn: Connection, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> list[tuple[Any, ...]] | None:
        """The HNSW lane's rows (record columns, then similarity), best first."""
        where, params = scope_clause(self, "r", lane.namespace, lane.request, lane.window)
        limit = lane.limit
        # the relaxed scan's first rows are not always the nearest: read four times
        # as many, keep the best (bench/backends.py measures recall@10)
        return vectors.approximate(  # the settings came with the count
            conn, lane.namespace, prefixed("r"), where, params, embedder_id, query,
            OVERFETCH * limit, ef_search=None,
        )  # fmt: skip

    def build_vector_index(self, dimensions: int) -> None:
        self._indexes.ensure(dimensions)

    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT r.id, v.embedding FROM records r JOIN vectors v"
                " ON v.namespace = r.namespace AND v.record = r.rowid"
                " WHERE r.namespace = %s AND v.embedder_id = %s AND r.id = ANY (%s)",
                (namespace, embedder_id, list(ids)),
            ).fetchall()
        return {row[0]: row[1].to_numpy().astype(np.float32).tolist() for row in rows}

    # -- maintenance ----------------------------------------------------------------

    def close(self) -> None:
        self._indexes.close()  # a build under way stopped: it holds locks of the schema
        self._statistics.close()
        self.db.close()

    def backup(self, path: str) -> None:
        raise InvalidInput(
            "erstwhile backup copies a SQLite file; back up PostgreSQL with pg_dump "
            "(pg_dump --format=custom --schema=SCHEMA --file=PATH URL; see docs/backup.md), "
            "or take a portable copy with erstwhile export"
        )

    def integrity(self) -> list[Finding]:
        """PostgreSQL checks its own pages (``pg_amcheck`` on demand); here: every
        vector has a direction (pgvector itself refuses NaN and infinities), and no
        row of the tables without a foreign key (m010) points at a missing record."""
        vectors = Finding("vectors readable")
        records = Finding("rows of a record")
        orphans = " UNION ALL ".join(
            f"SELECT '{table}', count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM"
            " records r WHERE r.namespace = t.namespace AND r.rowid = t.record)"
            for table in UNCHAINED
        )
        with self.db.snapshot() as tx:
            self.every_shard(tx)
            row = tx.execute(
                "SELECT count(*) FROM vectors WHERE dimensions > 0 AND vector_norm(embedding) = 0"
            ).fetchone()
            for table, count in tx.execute(orphans).fetchall():
                if count:
                    records.problems.append(f"{count} rows of {table} point at no record")
        if row and row[0]:
            vectors.problems.append(f"{row[0]} vectors are all zeros")
        return [vectors, records]

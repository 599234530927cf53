"""Connections to PostgreSQL: one pool per store, transactions, and retries.

Connections are autocommit; every write runs inside ``atomic()`` (one transaction,
READ COMMITTED, rows read for update locked with ``FOR UPDATE``) and every
multi-statement read inside ``snapshot()`` (REPEATABLE READ, read only). A
transaction that loses a deadlock or a serialisation race is run again from the
start — it has changed nothing, and the store's writes are pure functions of the
database state — so concurrent writers wait for each other instead of failing.
"""

from __future__ import annotations

import logging
import re
import select
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import IsolationLevel, errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from erstwhile.domain.errors import InvalidInput, StorageUnavailable

log = logging.getLogger("erstwhile.store.postgres")

T = TypeVar("T")


@lru_cache(maxsize=4096)
def _native(sql: str) -> str:
    # The shared SQL writes ``?``; psycopg reads ``%s`` (and this dialect's own SQL
    # may use ``%s`` and ``%b`` already). No statement has a literal ``?``.
    return sql.replace("?", "%s")


#: An INSERT that copies rows from a table (not from ``unnest`` of array parameters).
_COPIES_ROWS = re.compile(r"\s*INSERT INTO \w+ \([^)]*\)\s+SELECT\b(?![^;]*\bunnest\()", re.I)

#: Rows per INSERT … SELECT FROM unnest(…): one array parameter per column, so the
#: statement's text (which the driver parses) does not grow with the batch.
ROWS_PER_STATEMENT = 5000
#: From this many rows held back, a write leaves pipeline mode (which cannot COPY) and
#: a table's rows go by binary COPY: no statement to plan, no arrays to build.
COPY_FROM = 64


_COLUMN_TYPES: dict[str, dict[str, str]] = {}


def _column_types(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    """Each column's type of one of the store's tables (the same in every store's
    schema: read once per process)."""
    types = _COLUMN_TYPES.get(table)
    if types is None:
        rows = conn.execute(
            "SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_attribute a"
            " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            (table,),
        ).fetchall()
        types = _COLUMN_TYPES[table] = dict(rows)
    return types


class Deferred:
    """Rows held back for one table, sent when the transaction next does anything else
    or ends: by binary ``COPY`` when there are many and no ``suffix``, else as
    ``INSERT … SELECT FROM unnest(…)`` (many records' rows per statement). ``suffix``
    follows the SELECT (ON CONFLICT …); rows held by key (``keyed``) replace each
    other when their keys are equal (a later one wins)."""

    __slots__ = ("columns", "keyed_rows", "overriding", "rows", "suffix", "table")

    def __init__(
        self, table: str, columns: Sequence[str], suffix: str, overriding: bool, keyed: bool
    ) -> None:
        self.table, self.columns, self.suffix = table, tuple(columns), suffix
        self.overriding = overriding
        self.rows: list[Sequence[Any]] = []
        self.keyed_rows: dict[Any, Sequence[Any]] = {}

    def send(self, conn: psycopg.Connection[Any], *, copy: bool) -> None:
        types = _column_types(conn, self.table)
        rows = self.rows + list(self.keyed_rows.values())  # a table's rows are one or the other
        if copy and not self.suffix and len(rows) >= COPY_FROM:
            # COPY writes identity columns as given (as OVERRIDING SYSTEM VALUE does)
            names = ", ".join(self.columns)
            with conn.cursor().copy(
                f"COPY {self.table} ({names}) FROM STDIN (FORMAT BINARY)".encode()
            ) as out:
                out.set_types([types[column] for column in self.columns])
                for row in rows:
                    out.write_row(row)
            return
        casts = ", ".join(f"%b::{types[column]}[]" for column in self.columns)
        identity = " OVERRIDING SYSTEM VALUE" if self.overriding else ""
        sql = (
            f"INSERT INTO {self.table} ({', '.join(self.columns)}){identity}"
            f" SELECT * FROM unnest({casts}){self.suffix}"
        ).encode()
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            conn.execute(sql, [list(column) for column in zip(*chunk, strict=True)])


class Connection:
    """A psycopg connection that also takes the shared SQL's ``?`` placeholders, and
    holds back inserted rows (:meth:`defer`) until the next other statement; everything
    else is the psycopg connection's (``raw``). ``pipeline`` holds the pipeline mode a
    write runs in, if it does, until enough rows are held back to COPY them."""

    __slots__ = ("fresh", "held", "literal", "pending", "pipeline", "raw")

    def __init__(
        self, raw: psycopg.Connection[Any], pipeline: ExitStack | None = None, *,
        literal: bool = False,
    ) -> None:  # fmt: skip
        self.raw = raw
        self.pipeline = pipeline
        #: on Citus: an ``INSERT … SELECT`` goes with its values in its text (below)
        self.literal = literal
        self.pending: dict[str, Deferred] = {}
        self.held = 0
        #: rowids this transaction drew for records it creates: no row of any table
        #: can name them yet, so their rows need no ON CONFLICT
        self.fresh: set[int] = set()

    def defer(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
        suffix: str = "", key: Callable[[Sequence[Any]], Any] | None = None,
        overriding: bool = False, name: str | None = None,
    ) -> None:  # fmt: skip
        """Inserts ``rows`` later, in order, with the rows deferred before them under
        the same ``name`` (the table, unless given; its first call fixes the columns
        and the suffix; ``overriding``: values given for an identity column)."""
        deferred = self.pending.get(name or table)
        if deferred is None:
            deferred = self.pending[name or table] = Deferred(
                table, columns, suffix, overriding, key is not None
            )
        if key is None:
            deferred.rows += rows
        else:
            keyed = deferred.keyed_rows
            for values in rows:
                keyed[key(values)] = values
        self.held += len(rows)
        if self.held >= COPY_FROM and self.pipeline is not None:
            self.leave_pipeline()

    def leave_pipeline(self) -> None:
        """Ends pipeline mode for the rest of the transaction (what was sent is synced:
        its results stay readable, its errors are raised here)."""
        if self.pipeline is not None:
            stack, self.pipeline = self.pipeline, None
            stack.close()

    def flush(self) -> None:
        """Sends every deferred row: ``records`` first (the other tables point at it)."""
        if not self.pending:
            return
        pending, self.pending, self.held = self.pending, {}, 0
        copy = self.pipeline is None
        for name in sorted(pending, key=lambda name: name != "records"):
            pending[name].send(self.raw, copy=copy)

    def execute(self, sql: Any, params: Any = None) -> psycopg.Cursor[Any]:
        if self.pending:
            self.flush()
        if params is None:  # no placeholders are parsed at all
            return self.raw.execute(sql)
        if self.literal and isinstance(sql, str) and _COPIES_ROWS.match(sql):
            # Citus plans an INSERT … SELECT between co-located tables as one task per
            # shard unless the namespace it reads is a value it can prune by at plan
            # time: a parameter is not one (every archived version reached all 32
            # shards); bound by the client, it is one task on one shard
            return psycopg.ClientCursor(self.raw).execute(_native(sql), params)
        return self.raw.execute(_native(sql) if isinstance(sql, str) else sql, params)

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        if self.pending:
            self.flush()
        with self.raw.cursor() as cursor:
            cursor.executemany(_native(sql), rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


RETRIES = 20


def with_schema(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema`` (then public, where pgvector is):
    how one database holds several stores."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema},public"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


#: Raised when two transactions race for the same rows; running again resolves it.
RETRYABLE = (errors.DeadlockDetected, errors.SerializationFailure)


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparsable url>"
    host, port, db = info.get("host", "localhost"), info.get("port", "5432"), info.get("dbname")
    return f"postgresql://{info.get('user', '')}@{host}:{port}/{db or ''}"


CONNECT_TIMEOUT = 10  # seconds, unless the URL sets connect_timeout


def connect_options(url: str) -> dict[str, Any]:
    """Options for every connection: autocommit, and a connect timeout unless the URL
    has one (libpq waits forever by default)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        raise InvalidInput(f"storage url is not a valid PostgreSQL URL: {error}") from None
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in info:
        options["connect_timeout"] = CONNECT_TIMEOUT
    return options


def unavailable(url: str, error: Exception) -> StorageUnavailable:
    """A driver error that says the server cannot be used (it cannot be reached, it
    went away, the pool waited in vain), its message without the URL's password."""
    return StorageUnavailable(f"cannot connect to {redacted(url)}: {error}")


#: Driver errors that mean the database cannot be used right now (not a bug of ours).
UNAVAILABLE = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)


def connect(url: str) -> psycopg.Connection[Any]:
    """One autocommit connection (migrations, tools); the pool serves everything else."""
    options = connect_options(url)
    try:
        return psycopg.connect(url, **options)
    except psycopg.OperationalError as error:
        raise unavailable(url, error) from None


def still_connected(conn: psycopg.Connection[Any]) -> None:
    """The pool's check of a connection it is about to hand out. An idle connection
    has nothing to read unless the server has spoken: after a restart, its notice
    that it shut down, then the end of the stream. Only then is a round trip spent
    (and fails, so the pool discards the connection and makes a new one): a server
    that went away costs the next request nothing, and a healthy one costs a poll."""
    if select.select([conn.fileno()], [], [], 0)[0]:
        ConnectionPool.check_connection(conn)


class Database:
    """A connection pool on one PostgreSQL database (and search_path).

    ``timeout``: seconds a caller waits for a connection; ``statement_timeout``:
    seconds (0: no limit) before the server cancels a statement of this pool."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        statement_timeout: float = 0.0,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
        literal_copies: bool = False,
    ) -> None:
        self.url = url
        self.literal = literal_copies  # on Citus (Connection.execute)
        limit = round(statement_timeout * 1000)

        def prepared(conn: psycopg.Connection[Any]) -> None:
            if limit:
                conn.execute(f"SET statement_timeout = {limit}".encode())  # an int of ours
            if configure is not None:
                configure(conn)

        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs=connect_options(url),
            configure=prepared,
            check=still_connected,
            open=False,
            name="erstwhile",
        )
        try:
            self.pool.open(wait=True, timeout=30)
        except UNAVAILABLE as error:
            self.pool.close()
            raise unavailable(url, error) from None

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self.pool.connection() as conn:
                yield conn
        except RETRYABLE:
            raise
        except (errors.CharacterNotInRepertoire, errors.UntranslatableCharacter) as error:
            # PostgreSQL's text and jsonb cannot hold U+0000; the transaction rolled back
            raise InvalidInput(
                f"PostgreSQL cannot store the NUL character (U+0000) in text ({error}); "
                "remove it from the record's content, tags, metadata and other text fields"
            ) from None
        except errors.QueryCanceled as error:
            raise StorageUnavailable(
                f"a statement on {redacted(self.url)} was cancelled ({error}); raise "
                "storage.statement_timeout if it is expected to take this long"
            ) from None
        except UNAVAILABLE as error:
            raise unavailable(self.url, error) from None

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled autocommit connection: each statement is its own transaction."""
        with self._pooled() as conn:
            yield Connection(conn, literal=self.literal)

    read = connection

    @contextmanager
    def atomic(self) -> Iterator[Connection]:
        """One write transaction (READ COMMITTED; lock what you read with FOR UPDATE)."""
        with self._pooled() as conn, conn.transaction():
            tx = Connection(conn, literal=self.literal)
            yield tx
            tx.flush()  # rows held back are part of the transaction

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction: every statement inside sees the same committed state."""
        with self._pooled() as conn:
            # the BEGIN itself names the isolation: no SET TRANSACTION round trip
            conn.isolation_level, conn.read_only = IsolationLevel.REPEATABLE_READ, True
            try:
                with conn.transaction():
                    yield Connection(conn, literal=self.literal)
            finally:
                # back to the pool's default for the next user; a connection that broke
                # (not idle) is discarded by the pool, settings and all
                if conn.pgconn.transaction_status == TransactionStatus.IDLE:
                    conn.isolation_level, conn.read_only = None, None

    @contextmanager
    def pipelined(self) -> Iterator[Connection]:
        """``atomic()`` in pipeline mode: statements whose results nobody reads are
        sent without waiting, so a write costs a few round trips, not one per row.
        A write that holds back many rows leaves it (:meth:`Connection.defer`), and
        its rows go by COPY at the end."""
        with self._pooled() as conn, conn.transaction():
            with ExitStack() as stack:
                stack.enter_context(conn.pipeline())
                tx = Connection(conn, stack, literal=self.literal)
                yield tx
            tx.pipeline = None
            tx.flush()

    def write(self, work: Callable[[Connection], T], *, pipeline: bool = True) -> T:
        """Runs ``work`` in one transaction, again from the start when it loses a race."""
        delay = 0.002
        for attempt in range(RETRIES):
            try:
                with self.pipelined() if pipeline else self.atomic() as conn:
                    return work(conn)
            except RETRYABLE as error:
                if attempt == RETRIES - 1:
                    raise
                log.debug("transaction retried after %s", type(error).__name__)
            except errors.UniqueViolation as error:
                # two writers created the same new id at once: the loser runs again and
                # finds the record the winner wrote, as if the writes had been serial
                constraint = error.diag.constraint_name or ""
                if constraint != "records_namespace_id_key" or attempt == RETRIES - 1:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        raise AssertionError("unreachable")

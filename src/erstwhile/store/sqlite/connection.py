"""Opening a SQLite file for erstwhile: WAL, a busy timeout, and ``atomic()``.

Writers take the write lock up front (``BEGIN IMMEDIATE``) so two processes never
deadlock upgrading a read to a write; a busy file is waited for, not reported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from erstwhile.domain.errors import StorageUnavailable

T = TypeVar("T")

log = logging.getLogger("erstwhile.store.sqlite")

BUSY_TIMEOUT_MS = 60_000
#: Bytes in a page of a file this module creates (SQLite's default is 4,096).
PAGE_SIZE = 8_192
CHECKPOINT_WAIT_MS = 50
#: WAL pages (8 KiB: :data:`PAGE_SIZE`) after which a committing writer checkpoints
#: itself: only when the checkpoints made beside the writers (:class:`Checkpointer`)
#: fall this far behind.
WAL_CHECKPOINT_PAGES = 20_000
#: Seconds from one checkpoint beside the writers to the next, at least.
CHECKPOINT_EVERY_S = 1.0
_LOCK_RETRY_SECONDS = 120.0


def connect(path: str) -> sqlite3.Connection:
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # A new file's pages (a file that has any keeps its own): a record's vector
    # (1,536 bytes at 384 dimensions) fits two to a 4 KiB page, five to an 8 KiB one.
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    _with_lock_retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # A hard delete must leave no bytes behind: freed cells and pages are zeroed. Set
    # here rather than trusted to the build's default (which differs between builds).
    conn.execute("PRAGMA secure_delete = ON")
    # Temporary tables (a lexical merge's postings: words of records) and sorts stay in
    # memory, never in a file of their own that a hard delete could not scrub.
    conn.execute("PRAGMA temp_store = MEMORY")
    # Scope scans touch many pages: keep them in memory rather than in syscalls.
    conn.execute("PRAGMA cache_size = -65536")  # 64 MiB per connection
    conn.execute("PRAGMA mmap_size = 1073741824")
    # Checkpoints (copying the WAL into the file, and syncing both) are made beside the
    # writers (Checkpointer), at most one a second; a writer makes one in its commit
    # only past ~160 MiB of WAL, when those fall behind. SQLite's default, every 4 MiB,
    # checkpointed after nearly every batch of 1,000 records, writing the pages that
    # the next batch rewrites again, and the writer waited for it. A process crash
    # loses nothing either way; with synchronous = NORMAL a power loss can take back
    # what was committed since the last checkpoint: about a second of commits.
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
    return conn


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error)
    return "database is locked" in text or "database is busy" in text


def _with_lock_retry(fn: Callable[[], T]) -> T:
    """``fn()``, called again while the file is locked (up to a deadline); its result."""
    deadline = time.monotonic() + _LOCK_RETRY_SECONDS
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def unavailable(path: str, error: sqlite3.Error | OSError) -> StorageUnavailable | None:
    """The domain error for a driver error that says the file cannot be used (it is
    not a database, cannot be opened or read, stays locked), else None: any other
    driver error is a bug of ours and stays what it is."""
    if (
        isinstance(error, sqlite3.OperationalError | OSError)
        or type(error) is sqlite3.DatabaseError
    ):
        return StorageUnavailable(f"cannot open database {path}: {error}")
    return None


class translated:  # lower case: used like the function it replaced
    """Driver errors inside become :class:`StorageUnavailable` where they mean that.

    A plain class rather than a generator-based context manager: every search
    enters one, and this costs a fraction of the microseconds."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if isinstance(error, sqlite3.Error | OSError):
            domain = unavailable(self.path, error)
            if domain is not None:
                raise domain from None


class _Reading(translated):
    """``Database.read()``: the calling thread's connection, errors translated."""

    __slots__ = ("db",)

    def __init__(self, db: Database) -> None:
        super().__init__(db.path)
        self.db = db

    def __enter__(self) -> sqlite3.Connection:  # type: ignore[override]
        try:  # opening the thread's connection can fail too
            return self.db.conn()
        except (sqlite3.Error, OSError) as error:
            self.__exit__(type(error), error, None)
            raise


_RECORDS = "INSERT INTO records "


class Deferred:
    """Rows held back for one statement of the store's own, sent with one
    ``executemany`` when the transaction next does anything else or ends, or, when
    they meet no conflict among themselves (``many``: the statement's ``INSERT INTO t
    (columns) VALUES`` head, its width and its ON CONFLICT suffix), as statements of
    many rows each (:func:`insert_many`)."""

    __slots__ = ("many", "round", "rows", "sql")

    def __init__(self, sql: str, round: int, many: tuple[str, int, str] | None) -> None:
        self.sql, self.round, self.many = sql, round, many
        self.rows: list[Sequence[Any]] = []

    def send(self, conn: sqlite3.Connection) -> None:
        if self.many is not None:
            head, width, suffix = self.many
            insert_many(conn, head, width, self.rows, suffix)
        else:
            conn.executemany(*without_nulls(self.sql, self.rows))

    def rank(self) -> tuple[int, bool]:
        return self.round, not self.sql.startswith(_RECORDS)


#: ``INSERT INTO t (columns) VALUES (?, ..., ?)``, then anything but a value.
_PLAIN_INSERT = re.compile(r"(INSERT INTO \w+ \([^)]*\) VALUES )\((\?(?:, \?)*)\)([^?]*)", re.S)


@lru_cache(maxsize=256)
def _plain_insert(sql: str) -> tuple[str, int, str] | None:
    """The head, number of values and tail of a plain insert (:data:`_PLAIN_INSERT`)."""
    found = _PLAIN_INSERT.fullmatch(sql)
    return None if found is None else (found[1], found[2].count("?"), found[3])


def _values(width: int, nulls: tuple[int, ...]) -> str:
    """One row's ``(?, …)`` of ``width`` values, NULL written at ``nulls``."""
    return "(" + ", ".join("NULL" if i in nulls else "?" for i in range(width)) + ")"


@lru_cache(maxsize=256)
def _with_nulls(sql: str, nulls: tuple[int, ...]) -> str:
    plain = _plain_insert(sql)
    assert plain is not None
    head, width, tail = plain
    return f"{head}{_values(width, nulls)}{tail}"


def null_places(rows: Sequence[Sequence[Any]], width: int) -> tuple[int, ...]:
    """The places among ``width`` where every row of ``rows`` holds None."""
    first = rows[0]
    return tuple(
        i for i in range(width)
        if first[i] is None and list(map(itemgetter(i), rows)).count(None) == len(rows)
    )  # fmt: skip


def _kept(rows: Sequence[Sequence[Any]], width: int, nulls: tuple[int, ...]) -> Any:
    """Each row without its values at ``nulls`` (a sequence each, lazily)."""
    kept = [i for i in range(width) if i not in nulls]
    if len(kept) > 1:
        return map(itemgetter(*kept), rows)
    return ([row[i] for i in kept] for row in rows)


def without_nulls(
    sql: str, rows: list[Sequence[Any]]
) -> tuple[str, list[Sequence[Any]] | Iterator[Sequence[Any]]]:
    """``sql`` and ``rows`` for ``executemany``, the values every row leaves None
    written as NULL in the statement instead of bound (a plain insert's): Python's
    sqlite3 binds a None through its adapter lookup, the dearest of all values (a
    batch of 1,000 records binds ~11,000, ~2 ms of a batch's ~60)."""
    plain = _plain_insert(sql) if rows else None
    if plain is None:
        return sql, rows
    nulls = null_places(rows, plain[1])
    if not nulls:
        return sql, rows
    return _with_nulls(sql, nulls), _kept(rows, plain[1], nulls)


#: Parameters of one statement of :func:`insert_many` at most (the bound of SQLite
#: before 3.32; later ones allow 32766).
MAX_PARAMETERS = 999


def insert_many(
    conn: sqlite3.Connection, head: str, width: int, rows: Sequence[Sequence[Any]],
    suffix: str = "",
) -> None:  # fmt: skip
    """``head`` (``INSERT INTO t (columns) VALUES``) for every row, as statements of
    many rows each (``suffix`` an ON CONFLICT clause, the rows distinct in its key), in
    order, the values every row leaves None written as NULL (as :func:`without_nulls`).
    One statement per row costs Python's sqlite3 about as much again as SQLite
    takes to insert the row, and AUTOINCREMENT writes its counter once per statement: a
    batch's 1,000 tail rows take 0.38 ms of CPU this way against executemany's 1.5, its
    1,000 documents 0.71 against 1.19 (medians of 15), its ledger rows 0.95 against 2.25
    and its metadata rows 1.85 against 2.22 (medians of 100 batches). Into a large
    populated table it saved nothing measurable (a merge's postings, the records rows),
    so only rows a caller marks go this way (``Dialect.insert_rows(distinct=True)``)."""
    if not rows:
        return
    nulls = null_places(rows, width)
    bound = width - len(nulls)
    if nulls:
        rows = list(_kept(rows, width, nulls))
    per = MAX_PARAMETERS // max(bound, 1)
    one = _values(width, nulls)
    full = len(rows) - len(rows) % per
    if full:
        sql = f"{head} {', '.join([one] * per)}{suffix}"
        conn.executemany(sql, (list(chain.from_iterable(rows[i : i + per]))
                               for i in range(0, full, per)))  # fmt: skip
    rest = rows[full:]
    if rest:
        conn.execute(f"{head} {', '.join([one] * len(rest))}{suffix}", [*chain.from_iterable(rest)])


class Transaction:
    """A write transaction's connection that holds back rows (:meth:`defer`) until
    its next other statement, so a batch's rows of one table go to SQLite in one
    ``executemany`` instead of one statement per record. Order is kept: every other
    statement, a savepoint and the commit send what waits first, round by round (a
    record's k-th change in the transaction replaces its row in round 2k and inserts
    its rows in round 2k + 1, so each record's statements run in its order; rows of
    different records never meet), in a round ``records`` rows first (the others
    point at them), then each statement's in the order first deferred.
    Everything else is the sqlite3 connection's (``raw``)."""

    __slots__ = ("committed", "pending", "raw")

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self.pending: dict[tuple[int, str], Deferred] = {}
        #: What to run once the transaction has committed (:meth:`Database.on_commit`).
        self.committed: list[Callable[[], None]] = []

    def defer(
        self, sql: str, rows: Sequence[Sequence[Any]], *, round: int = 1,
        many: tuple[str, int, str] | None = None,
    ) -> None:  # fmt: skip
        """Runs ``sql`` for each of ``rows`` later, in order (``many``: rows that meet
        no conflict among themselves, nor with any other rows held for ``sql`` with
        it, may go as multi-row statements; see :class:`Deferred`)."""
        deferred = self.pending.get((round, sql))
        if deferred is None:
            deferred = self.pending[round, sql] = Deferred(sql, round, many)
        elif many is None:  # rows that may conflict among the held ones: one by one
            deferred.many = None
        deferred.rows.extend(rows)

    def flush(self) -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, {}
        for deferred in sorted(pending.values(), key=Deferred.rank):  # stable
            deferred.send(self.raw)

    def discard(self) -> None:
        self.pending = {}

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        if self.pending:
            self.flush()
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        if self.pending:
            self.flush()
        return self.raw.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class Background(ABC):
    """A task run from a thread of its own whenever asked (:meth:`ask`), at most once
    every ``every_s`` seconds (unless a run answers that it left work behind: the next
    ask is then answered at once), so the writer that asks never waits for it. The
    thread starts at the process's first ask (a forked child's first starts its own)
    and ends with :meth:`stop`. A subclass gives the task (:meth:`session`: what the
    thread opens once, and the task as a callable)."""

    name = "erstwhile-background"
    every_s = 0.0

    def __init__(self) -> None:
        #: Held while the task runs.
        self.lock = threading.Lock()
        self._due = threading.Event()
        self._stopped = threading.Event()
        self._answered = threading.Condition()
        self._asked = self._ran = 0
        self._thread: threading.Thread | None = None
        self._pid = 0

    @abstractmethod
    def session(self) -> AbstractContextManager[Callable[[], bool | None]]:
        """What the thread opens once (closed when it ends), giving the task, which
        returns True when it left work behind."""

    def ask(self) -> None:
        """The task is due: it runs as soon as it may."""
        if self._pid != os.getpid():  # the first ask, or the first of a forked child
            self._pid = os.getpid()
            self._stopped.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        with self._answered:
            self._asked += 1
        self._due.set()

    def settle(self, timeout: float = 60.0) -> bool:
        """Waits until the task has run after every ask made so far (or the thread has
        ended); whether it did within ``timeout`` seconds."""
        with self._answered:
            return self._answered.wait_for(
                lambda: self._ran >= self._asked or self._thread is None, timeout
            )

    def _run(self) -> None:
        try:
            with self.session() as task:
                while not self._stopped.is_set():
                    self._due.wait()
                    self._due.clear()
                    if self._stopped.is_set():
                        return
                    with self._answered:
                        asked = self._asked
                    behind = False
                    with self.lock:
                        try:
                            behind = bool(task())
                        except Exception as error:  # the writers do it themselves, later
                            log.warning("%s failed: %s", self.name, error)
                    with self._answered:
                        self._ran = asked
                        self._answered.notify_all()
                    if not behind:
                        self._stopped.wait(self.every_s)
        except (sqlite3.Error, OSError) as error:  # the writers do it themselves
            log.warning("%s cannot start: %s", self.name, error)
        finally:
            with self._answered:
                self._ran = self._asked
                self._answered.notify_all()

    def stop(self, *, wait: bool = True) -> None:
        """Ends the thread, after the task it may be running (waited for, with
        ``wait``)."""
        thread, self._thread = self._thread, None
        self._pid = 0
        self._stopped.set()
        self._due.set()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()


class Checkpointer(Background):
    """Copies the WAL into the database file beside the writers, once a write has
    committed and at most once every :data:`CHECKPOINT_EVERY_S`, so a commit never
    waits for a checkpoint. The copy runs in SQLite on a connection of the thread's
    own, without Python's lock: a writer goes on meanwhile (a PASSIVE checkpoint waits
    for no reader or writer; what it cannot copy yet, the next one does). Asked by
    every commit of the process that commits.

    A checkpoint that ends behind (frames a reader still needs), or with the WAL past
    half of :data:`WAL_CHECKPOINT_PAGES`, is followed by another at the next commit,
    not a second later: SQLite starts the WAL over only at a write whose transaction
    began with every frame copied, which a second's copy never left back-to-back
    batches, so the WAL grew until a commit checkpointed it itself (~13,000 frames,
    104-148 ms, twice in 100k records). The copy at the next commit is of one
    commit's pages, and the WAL starts over once one ends before the next write."""

    name = "erstwhile-checkpoint"
    every_s = CHECKPOINT_EVERY_S

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    @contextmanager
    def session(self) -> Iterator[Callable[[], bool | None]]:
        conn = connect(self.path)

        def checkpoint() -> bool:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            return bool(busy) or copied < frames or frames >= WAL_CHECKPOINT_PAGES // 2

        try:
            yield checkpoint
        finally:
            conn.close()


class Database:
    """One connection per thread on one file; writes serialised within the process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        #: Notified at each write transaction's commit (:meth:`next_commit`).
        self._committed = threading.Condition()
        self._commits = 0
        self._checkpointer = Checkpointer(path) if path != ":memory:" else None
        if self._checkpointer is not None:  # a store dropped unclosed ends its thread too
            weakref.finalize(self, self._checkpointer.stop, wait=False)

    def conn(self) -> sqlite3.Connection:
        """The calling thread's connection (inside a write, with the write's held-back
        rows sent first, so whatever reads through it sees them)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            self._local.depth = 0
            self._local.tx = None
            with self._all_lock:
                self._all.append(conn)
        elif self._local.tx is not None:
            self._local.tx.flush()
        return conn

    @contextmanager
    def atomic(self) -> Iterator[Transaction]:
        """A write transaction at the outermost level, a savepoint when nested."""
        conn = self.conn()
        depth: int = self._local.depth
        if depth:
            outer: Transaction | None = self._local.tx  # None inside a read snapshot
            tx = self._local.tx = outer or Transaction(conn)
            name = f"sp{depth}"
            tx.execute(f"SAVEPOINT {name}")
            self._local.depth = depth + 1
            hooks = len(tx.committed)
            try:
                yield tx
            except BaseException:
                tx.discard()  # rows held back since the savepoint
                del tx.committed[hooks:]
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                raise
            else:
                tx.execute(f"RELEASE {name}")
            finally:
                self._local.depth = depth
                self._local.tx = outer
            return
        with self._write_lock:
            _with_lock_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            tx = self._local.tx = Transaction(conn)
            self._local.depth = 1
            try:
                yield tx
                tx.flush()
            except BaseException:
                tx.discard()
                conn.execute("ROLLBACK")
                raise
            else:
                _with_lock_retry(lambda: conn.execute("COMMIT"))
                if self._checkpointer is not None:
                    self._checkpointer.ask()
            finally:
                self._local.depth = 0
                self._local.tx = None
            with self._committed:
                self._commits += 1
                self._committed.notify_all()
            for hook in tx.committed:
                hook()

    def next_commit(self, timeout: float) -> None:
        """Waits until another write transaction of the process has committed, or
        ``timeout`` seconds: the writers' next moment without the write lock begins."""
        with self._committed:
            seen = self._commits
            self._committed.wait_for(lambda: self._commits != seen, timeout)

    def write_one(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs one statement as a write transaction of its own, under the process's
        write lock; its row count. SQLite takes the file's write lock, writes and
        commits within the one call that runs the statement, which never waits for
        Python's lock meanwhile: the write lock is held for the statement's own time,
        where a transaction of several statements also holds it while its thread waits
        for its turn at Python's lock between them (up to 5 ms each while another
        thread runs Python)."""
        conn = self.conn()
        assert not self._local.depth, "a statement of its own, in no transaction"
        with translated(self.path), self._write_lock:
            return _with_lock_retry(lambda: conn.execute(sql, params).rowcount)

    def writing(self) -> bool:
        """Whether the calling thread is inside a write transaction."""
        return getattr(self._local, "tx", None) is not None

    def on_commit(self, hook: Callable[[], None]) -> None:
        """Runs ``hook`` once the calling thread's write transaction has committed (never
        if it, or the savepoint it was called in, rolls back)."""
        self._local.tx.committed.append(hook)

    def read(self) -> _Reading:
        """The calling thread's connection (autocommit: each statement on its own)."""
        return _Reading(self)

    def write(self, work: Callable[[Transaction], T]) -> T:
        """Runs ``work`` in one write transaction (``atomic``)."""
        with translated(self.path), self.atomic() as conn:
            return work(conn)

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees the same committed state."""
        with translated(self.path):
            conn = self.conn()
            if self._local.depth:
                yield conn
                return
            conn.execute("BEGIN")
            self._local.depth = 1
            try:
                yield conn
            finally:
                self._local.depth = 0
                conn.execute("COMMIT")

    def checkpoint(self) -> bool:
        """Copies the WAL into the file and empties it (after a hard delete: the WAL
        still holds the deleted pages' old images). Waits at most a moment: when a
        reader still needs the WAL, it is left for SQLite's next checkpoint."""
        conn = self.conn()
        conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_WAIT_MS}")
        # not beside this process's own checkpoint, which would make this one give up
        with self._checkpointer.lock if self._checkpointer else contextlib.nullcontext():
            try:
                row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                return row is not None and row[0] == 0
            except sqlite3.OperationalError:
                return False
            finally:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        with self._all_lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._all.clear()
        self._local = threading.local()

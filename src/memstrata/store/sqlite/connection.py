"""Opening a SQLite file for memstrata: WAL, a busy timeout, and ``atomic()``.

Writers take the write lock up front (``BEGIN IMMEDIATE``) so two processes never
deadlock upgrading a read to a write; a busy file is waited for, not reported.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from memstrata.domain.errors import StorageUnavailable

T = TypeVar("T")

BUSY_TIMEOUT_MS = 60_000
CHECKPOINT_WAIT_MS = 50
_LOCK_RETRY_SECONDS = 120.0


def connect(path: str) -> sqlite3.Connection:
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _with_lock_retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # A hard delete must leave no bytes behind: freed cells and pages are zeroed. Set
    # here rather than trusted to the build's default (which differs between builds).
    conn.execute("PRAGMA secure_delete = ON")
    # Scope scans touch many pages: keep them in memory rather than in syscalls.
    conn.execute("PRAGMA cache_size = -65536")  # 64 MiB per connection
    conn.execute("PRAGMA mmap_size = 1073741824")
    return conn


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error)
    return "database is locked" in text or "database is busy" in text


def _with_lock_retry(fn: object) -> None:
    deadline = time.monotonic() + _LOCK_RETRY_SECONDS
    delay = 0.005
    while True:
        try:
            fn()  # type: ignore[operator]
            return
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


class Database:
    """One connection per thread on one file; writes serialised within the process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            self._local.depth = 0
            with self._all_lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction at the outermost level, a savepoint when nested."""
        conn = self.conn()
        depth: int = self._local.depth
        if depth:
            name = f"sp{depth}"
            conn.execute(f"SAVEPOINT {name}")
            self._local.depth = depth + 1
            try:
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                raise
            else:
                conn.execute(f"RELEASE {name}")
            finally:
                self._local.depth = depth
            return
        with self._write_lock:
            _with_lock_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            self._local.depth = 1
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                _with_lock_retry(lambda: conn.execute("COMMIT"))
            finally:
                self._local.depth = 0

    def read(self) -> _Reading:
        """The calling thread's connection (autocommit: each statement on its own)."""
        return _Reading(self)

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
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
        try:
            row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return row is not None and row[0] == 0
        except sqlite3.OperationalError:
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._all.clear()
        self._local = threading.local()

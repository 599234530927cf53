"""Storage: one SQL store (``sql/``) and a dialect per backend (``sqlite/``,
``postgres/``). All SQL, every driver import, and all knowledge of which backend a
target names live under this package and nowhere else.

The copies a process keeps of what the database holds, and the change feed each
follows to stay current (every copy is rebuilt from the database when its feed cannot
say what changed; none can change an answer). Three feeds, each for a reason:

- SQLite's ``scope_log`` (``sqlite/change_log.py``), the rowids of the records whose
  row, or whose vector alone, was written: the one feed of every SQLite copy of
  records — the vector matrix (``sqlite/vectors.py``, and its saved copy's commit
  point), the scope copy (``sqlite/scope_cache.py``) and the past-vector copy
  (``sqlite/past_vectors.py``). A record's change touches several tables (tags,
  metadata, vectors, past versions) that carry no seq of their own; each reader takes
  the records logged past its seq as they are now. Each lexical merge prunes it.
- SQLite's lexical tail (``sqlite/lexical_tail.py``) is a queue, not a log: the
  documents not merged yet, in order, which a search scores itself; the process's copy
  reads the rows past the last it read, and a merge removes the first ones, so what the
  copy holds is bounded by the merge threshold rather than by a log's pruning.
- PostgreSQL's scope copy (``postgres/scope_copy.py``) compares the ``xid`` each row
  carries with the search's snapshot: there several writers commit at once, and a
  sequence is not in commit order (a transaction that commits later can hold a lower
  value), which a log read past a seq relies on (SQLite has one writer at a time)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from erstwhile.domain.errors import InvalidInput, NotFound
from erstwhile.store.base import Store

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class StorageOptions:
    """How a server store uses its database (PostgreSQL; SQLite has no pool).

    ``pool_size`` connections at most; a request waits up to ``pool_timeout``
    seconds for one (then ``erstwhile.storage.unavailable``); a statement running
    longer than ``statement_timeout`` seconds is cancelled (0: never)."""

    pool_size: int = 10
    pool_timeout: float = 10.0
    statement_timeout: float = 0.0


def resolve_target(target: str | os.PathLike[str]) -> str:
    """A PostgreSQL URL as given, or a filesystem path for SQLite from a path or a
    ``sqlite:///`` URL; any other scheme is :class:`InvalidInput`."""
    text = os.fspath(target)
    if text.startswith(POSTGRES_SCHEMES):
        return text
    if text.startswith("sqlite://"):
        # sqlite:///relative.db and sqlite:////absolute.db, as SQLAlchemy spells them
        path = text.removeprefix("sqlite://").removeprefix("/")
        return path or ":memory:"
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidInput(
            f"storage url scheme {scheme!r} is not supported; use a file path, sqlite:///PATH "
            "or postgresql://…"
        )
    return str(Path(text).expanduser())


def open_store(
    target: str | os.PathLike[str], *, create: bool = True, options: StorageOptions | None = None
) -> Store:
    """The store a target names (see :func:`resolve_target`), its schema migrated.

    With ``create=False`` (what a read asks for) a SQLite file that does not exist is
    an error naming the path, and nothing is created: no folder, no empty database.
    A PostgreSQL database is never created here; its schema is, on either setting.
    A database that cannot be used (a file that is not a database, a server that
    cannot be reached) is :class:`~erstwhile.domain.errors.StorageUnavailable`."""
    from erstwhile.store.sql.store import SqlStore

    resolved = resolve_target(target)
    postgres = resolved.startswith(POSTGRES_SCHEMES)
    if not create and not postgres and resolved != ":memory:" and not Path(resolved).exists():
        raise NotFound(
            f"no database at {resolved}: nothing has been stored there yet "
            "(check --db / ERSTWHILE_DB, or write a record first)"
        )
    if postgres:
        try:
            from erstwhile.store.postgres.dialect import PostgresDialect
        except ImportError as error:
            raise InvalidInput(
                f"storage url {resolved.split('://', 1)[0]}://… needs the PostgreSQL driver "
                f"({error.name} is missing): pip install 'erstwhile[postgres]'"
            ) from None
        return SqlStore(PostgresDialect(resolved, options=options or StorageOptions()))
    from erstwhile.store.sqlite.dialect import SqliteDialect

    return SqlStore(SqliteDialect(resolved))

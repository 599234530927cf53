"""Storage: one SQL store (``sql/``) and a dialect per backend (``sqlite/``,
``postgres/``). All SQL, every driver import, and all knowledge of which backend a
target names live under this package and nowhere else.

The copies a process keeps of what the database holds, and the change feed each
follows to stay current (every copy is rebuilt from the database when its feed cannot
say what changed; none can change an answer):

- SQLite's vector matrix (``sqlite/vectors.py``) reads ``vectors`` past its last
  ``seq``: each vector row carries the seq of its last write (a withdrawn one stays, of
  no dimensions) and a hard delete logs its record in ``vector_erasures``, so a refresh
  is one range scan that hands over the vectors themselves; the embed job writes
  vectors without touching their records, which a log of records would miss.
- SQLite's scope copy and past-vector copy (``sqlite/scope_cache.py``,
  ``sqlite/past_vectors.py``) read ``scope_log``, the rowids of records whose row was
  inserted, updated or deleted: a record's change touches several tables (tags,
  metadata, past versions) that carry no seq of their own. Each lexical merge prunes it
  (``scope_cache.prune_log``).
- SQLite's lexical tail (``sqlite/lexical_tail.py``) is not a log but the documents not
  merged yet, in order: the process's copy reads the rows past the last it read, and a
  merge removes the first ones.
- PostgreSQL's scope copy (``postgres/scope_copy.py``) compares the ``xid`` each row
  carries with the search's snapshot: a sequence there is not in commit order (a
  transaction that commits later can hold a lower value), which every SQLite feed
  relies on (one writer at a time)."""

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

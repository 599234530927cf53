"""Storage backends. All SQL lives under this package and nowhere else."""

from __future__ import annotations

from pathlib import Path

from memstrata.domain.errors import InvalidInput, NotFound
from memstrata.store.base import Store

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str) -> bool:
    return target.startswith(POSTGRES_SCHEMES)


def open_store(target: str, *, create: bool = True) -> Store:
    """The backend a resolved target names: a PostgreSQL URL or a SQLite file path.

    With ``create=False`` (what a read asks for) a SQLite file that does not exist is
    an error naming the path, and nothing is created: no folder, no empty database.
    A PostgreSQL database is never created here; its schema is, on either setting."""
    sqlite_file = not is_postgres_url(target) and target != ":memory:"
    if not create and sqlite_file and not Path(target).exists():
        raise NotFound(
            f"no database at {target}: nothing has been stored there yet "
            "(check --db / MEMSTRATA_DB, or write a record first)"
        )
    if is_postgres_url(target):
        try:
            from memstrata.store.postgres.store import PostgresStore
        except ImportError as error:
            raise InvalidInput(
                f"storage url {target.split('://', 1)[0]}://… needs the PostgreSQL driver "
                f"({error.name} is missing): pip install 'memstrata[postgres]'"
            ) from None
        return PostgresStore(target)
    from memstrata.store.sqlite.store import SqliteStore

    return SqliteStore(target)

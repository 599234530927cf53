"""Storage backends. All SQL lives under this package and nowhere else."""

from __future__ import annotations

from memstrata.domain.errors import InvalidInput
from memstrata.store.base import Store

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str) -> bool:
    return target.startswith(POSTGRES_SCHEMES)


def open_store(target: str) -> Store:
    """The backend a resolved target names: a PostgreSQL URL or a SQLite file path."""
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

"""Storage backends. All SQL lives under this package and nowhere else."""

from __future__ import annotations

from memstrata.store.base import Store


def open_store(target: str) -> Store:
    """The backend a resolved target names (today: a SQLite file path)."""
    from memstrata.store.sqlite.store import SqliteStore

    return SqliteStore(target)

"""The migration runner both dialects share; each dialect's migrations are its DDL.

Each migration is a named function registered in order; the applied ones are
recorded in ``schema_migrations``, so opening a store twice, or from two processes,
applies each exactly once. How migrations are grouped into transactions (and what
keeps two migrators apart) is the dialect's: ``step`` opens one migration's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from erstwhile.store.sql.dialect import Tx

Migration = Callable[[Tx], None]


def registrar(migrations: list[tuple[str, Migration]]) -> Callable[[Migration], Migration]:
    """A decorator that appends a migration to ``migrations`` under its name."""

    def migration(fn: Migration) -> Migration:
        if any(name == fn.__name__ for name, _ in migrations):
            raise ValueError(f"migration {fn.__name__} is registered twice")
        migrations.append((fn.__name__, fn))
        return fn

    return migration


def run_script(tx: Tx, script: str) -> None:
    """Runs statements one by one (no placeholders): a script runner of the driver
    would commit the open transaction."""
    for statement in script.split(";\n"):
        if statement.strip():
            tx.execute(statement)


def apply(
    tx: Tx,
    migrations: list[tuple[str, Migration]],
    now: int,
    step: Callable[[], AbstractContextManager[object]],
) -> list[str]:
    """Applies what is missing, each inside ``step()``. Returns the names applied."""
    tx.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)"
    )
    applied: list[str] = []
    for version, (name, fn) in enumerate(migrations, start=1):
        with step():
            done = tx.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
            ).fetchall()
            if not done:
                fn(tx)
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, now),
                )
                applied.append(name)
    return applied

"""Reading and writing a store's tables behind its back, on either backend.

Some tests must look under the API: that a failed batch changed no row, that a hard
delete left no trace, that deriving a vector touched no record, or that the history
walk survives a chain corrupted by hand. These helpers give them the same view on
SQLite and PostgreSQL, each through a connection of its own.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

#: The tables holding records and what derives from them (the same on both backends).
_TABLES = [
    "records", "record_past", "record_tags", "record_meta", "vectors", "ledger",
    "namespaces", "lexical_postings", "lexical_terms", "lexical_stats",
]  # fmt: skip
#: Both keep each record's terms (``lexical_docs``); SQLite's documents not merged yet
#: have no postings (their rowids listed in ``lexical_tail``, which holds no content).
TABLES = {"sqlite": [*_TABLES, "lexical_docs"], "postgres": [*_TABLES, "lexical_docs"]}
#: Tables that hold a record's own data, so must be empty after its hard delete (each
#: record's terms too: see :func:`record_tables`).
RECORD_TABLES = [
    "records", "record_past", "record_tags", "record_meta", "vectors", "lexical_postings",
]  # fmt: skip


def record_tables(target: str) -> list[str]:
    """:data:`RECORD_TABLES` of the backend of ``target``."""
    return [*RECORD_TABLES, "lexical_docs"]


def connect(target: str) -> psycopg.Connection[Any]:
    """A connection of the test's own to a PostgreSQL target. On the Citus lane a
    statement on many shards is an error for the store (tests/support/pg.py); these
    helpers read whole tables on purpose, so not for them."""
    conn = psycopg.connect(target)
    if "multi_task_query_log_level" in target:
        conn.execute("SET citus.multi_task_query_log_level = off")
        conn.commit()
    return conn


def backend_of(target: str) -> str:
    return "postgres" if target.startswith(("postgresql://", "postgres://")) else "sqlite"


def dump_tables(target: str, tables: list[str] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (default: all of :data:`TABLES`), sorted."""
    backend = backend_of(target)
    names = tables if tables is not None else TABLES[backend]
    return {name: sorted(rows, key=repr) for name, rows in _select_all(target, names).items()}


#: What is read of a table where it is not every column: which merge wrote a posting
#: (SQLite's ``seg``) is where it lies, not what it holds, so both backends' postings
#: read alike, and two stores merged at other moments hold the same rows.
_READ = {"lexical_postings": "namespace, term, record, tf, length"}


def _select_all(target: str, names: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    def sql(name: str) -> str:
        return f"SELECT {_READ.get(name, '*')} FROM {name}"

    if backend_of(target) == "postgres":
        with connect(target) as conn:
            return {n: conn.execute(sql(n).encode()).fetchall() for n in names}
    conn = sqlite3.connect(target)
    try:
        return {n: conn.execute(sql(n)).fetchall() for n in names}
    finally:
        conn.close()


def execute(target: str, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Runs one statement (``?`` placeholders) and commits it."""
    if backend_of(target) == "postgres":
        with connect(target) as conn:  # commits on leaving the block
            conn.execute(sql.replace("?", "%s").encode(), params)
        return
    conn = sqlite3.connect(target)
    try:
        with conn:
            conn.execute(sql, params)
    finally:
        conn.close()


def full_text_matches(target: str, word: str) -> int:
    """How many rows of the lexical index hold ``word`` (a term, as indexed)."""
    documents = " + (SELECT count(*) FROM lexical_docs WHERE ' ' || terms || ' ' LIKE ?)"
    sqlite = backend_of(target) == "sqlite"
    return int(
        scalar(
            target,
            "SELECT (SELECT count(*) FROM lexical_postings WHERE term = ?)"
            " + (SELECT count(*) FROM lexical_terms WHERE term = ?)"
            + (documents if sqlite else ""),
            (word, word, f"% {word} %") if sqlite else (word, word),
        )
    )


GARBAGE = b"this is not a database, only some words\n" * 200


def spoil_sqlite_file(memory: Any, path: Path) -> None:
    """Replaces an open store's SQLite file with :data:`GARBAGE`, its connections let
    go first, so the next call opens the file anew and finds no database there."""
    memory.service.store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    replacement = path.with_name(path.name + ".garbage")
    replacement.write_bytes(GARBAGE)
    os.replace(replacement, path)


def select(target: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every row a query (``?`` placeholders) returns."""
    if backend_of(target) == "postgres":
        with connect(target) as conn:
            return conn.execute(sql.replace("?", "%s").encode(), params).fetchall()
    conn = sqlite3.connect(target)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def scalar(target: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The one value a query (``?`` placeholders) returns."""
    rows = select(target, sql, params)
    assert rows
    return rows[0][0]


def tail_postings(target: str) -> list[tuple[Any, ...]]:
    """The postings ``(namespace, term, record, tf, length)`` of SQLite's documents not
    merged yet (``lexical_tail``), as ``lexical_postings`` will hold them."""
    rows = _select_all(target, ["lexical_docs", "lexical_tail"])
    tail = {row[1] for row in rows["lexical_tail"]}
    return sorted(
        (namespace, term, record, tf, length)
        for record, namespace, terms, length in rows["lexical_docs"]
        if record in tail
        for term, tf in Counter(str(terms).split()).items()
    )


def merges_settled(memory: Any) -> None:
    """Waits until the store's merges beside its writers (SQLite's tail, a thread of
    its own) have answered every write that asked for one, so a test reads the tail as
    the last write left it."""
    merger = getattr(memory.service.store.dialect, "merger", None)
    if merger is not None:
        assert merger.settle(), "the merge beside the writers did not finish in time"

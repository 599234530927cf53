""":func:`erstwhile.store.sqlite.connection.insert_many` (how a write transaction sends
rows marked distinct, ``Dialect.insert_rows(distinct=True)``: the lexical tail's and
documents' rows, as statements of many rows each) writes what one statement per row
writes: the same rows, in the same order (an AUTOINCREMENT key numbers them alike), and
an ON CONFLICT clause meets the rows already there as it would row by row. On a real
SQLite file, against ``executemany`` as the oracle, with row counts on either side of a
statement's bound; and a transaction holding rows for a statement sends them row by
row once any of them may conflict."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erstwhile.store.sqlite.connection import MAX_PARAMETERS, Transaction, insert_many

_TABLES = """
    CREATE TABLE {name} (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        term   TEXT NOT NULL,
        record INTEGER NOT NULL,
        tf     INTEGER NOT NULL,
        UNIQUE (term, record)
    );
"""
_UPSERT = " ON CONFLICT (term, record) DO UPDATE SET tf = {name}.tf + excluded.tf"
_WORDS = st.sampled_from(["river", "stone", "mill", "cloud", "größe", "水"])


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for name in ("ours", "oracle"):
        conn.execute(_TABLES.format(name=name))
    return conn


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    st.lists(st.tuples(_WORDS, st.integers(0, 400), st.integers(1, 9)), max_size=1300),
    st.integers(0, 700),
)
def test_rows_land_as_one_statement_per_row_lands_them(
    tmp_path: Path, rows: list[tuple[str, int, int]], before: int
) -> None:
    path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.db"
    conn = _connect(path)
    distinct = list(dict.fromkeys((term, record) for term, record, _ in rows))
    rows = [(term, record, 1 + record % 5) for term, record in distinct]  # keys distinct
    # some rows there already, so the upsert meets them; the seq counter moved on too
    there = [(term, record + 200, 2) for term, record, _ in rows[:before]]
    for name in ("ours", "oracle"):
        conn.executemany(f"INSERT INTO {name} (term, record, tf) VALUES (?, ?, ?)", there)
    conn.execute("BEGIN IMMEDIATE")
    insert_many(conn, "INSERT INTO ours (term, record, tf) VALUES", 3, rows,
                _UPSERT.format(name="ours"))  # fmt: skip
    conn.executemany("INSERT INTO oracle (term, record, tf) VALUES (?, ?, ?)"
                     + _UPSERT.format(name="oracle"), rows)  # fmt: skip
    conn.execute("COMMIT")
    ours = conn.execute("SELECT * FROM ours ORDER BY seq").fetchall()
    assert ours == conn.execute("SELECT * FROM oracle ORDER BY seq").fetchall()
    assert len(ours) == len({(t, r) for t, r, _ in [*there, *rows]})
    conn.close()


@pytest.mark.parametrize("count", [0, 1, MAX_PARAMETERS // 2 - 1, MAX_PARAMETERS // 2,
                                   MAX_PARAMETERS // 2 + 1, 3 * (MAX_PARAMETERS // 2)])  # fmt: skip
def test_each_bound_of_a_statement(tmp_path: Path, count: int) -> None:
    """Two columns: a statement holds MAX_PARAMETERS // 2 rows; a run of exactly that
    many, one more or one fewer, and none at all, each in order."""
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, a TEXT, b INTEGER)")
    rows = [(f"w{i}", i * 7) for i in range(count)]
    insert_many(conn, "INSERT INTO t (a, b) VALUES", 2, rows)
    assert conn.execute("SELECT a, b FROM t ORDER BY seq").fetchall() == rows
    assert [s for (s,) in conn.execute("SELECT seq FROM t ORDER BY seq")] == list(
        range(1, count + 1)
    )
    conn.close()


def test_a_transaction_sends_distinct_rows_many_to_a_statement_and_others_one_by_one(
    tmp_path: Path,
) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, a TEXT UNIQUE)")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    sql = "INSERT INTO t (a) VALUES (?) ON CONFLICT (a) DO NOTHING"
    many = ("INSERT INTO t (a) VALUES", 1, " ON CONFLICT (a) DO NOTHING")
    tx = Transaction(conn)
    tx.defer(sql, [(f"w{i}",) for i in range(5)], many=many)
    tx.flush()
    assert sum(s.startswith("INSERT") for s in statements) == 1  # one statement of 5
    statements.clear()
    tx.defer(sql, [("x",), ("y",)], many=many)
    tx.defer(sql, [("x",)])  # may meet the rows held: the whole run one by one
    tx.flush()
    assert sum(s.startswith("INSERT") for s in statements) == 3
    assert [a for (a,) in conn.execute("SELECT a FROM t ORDER BY seq")] == [
        "w0",
        "w1",
        "w2",
        "w3",
        "w4",
        "x",
        "y",
    ]
    conn.close()

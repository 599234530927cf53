"""A transaction's held rows of a plain insert go with the values every row leaves
None written as NULL in the statement (:func:`connection.without_nulls`): the same
rows land, in the same order, an ON CONFLICT clause meets them as ever, and a
statement whose values are not all plain parameters is sent as it is. On a real
SQLite file, against ``executemany`` of the statement as given as the oracle."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erstwhile.store.sqlite.connection import Transaction, without_nulls

_TABLE = """
    CREATE TABLE {name} (
        seq   INTEGER PRIMARY KEY AUTOINCREMENT,
        k     TEXT NOT NULL UNIQUE,
        a     INTEGER,
        b     TEXT DEFAULT 'not null',
        c     REAL
    )
"""
_INSERT = "INSERT INTO {name} (k, a, b, c) VALUES (?, ?, ?, ?)"
_UPSERT = " ON CONFLICT (k) DO UPDATE SET a = excluded.a, b = excluded.b, c = excluded.c"
_VALUE = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(["", "x", "größe"]),
                   st.sampled_from([0.0, -1.5]))  # fmt: skip


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    st.lists(st.tuples(st.sampled_from("pqrstu"), _VALUE, _VALUE, _VALUE), min_size=1,
             max_size=12),
    st.sampled_from([(), (None,), (None, None), (None, None, None)]),
    st.booleans(),
)  # fmt: skip
def test_rows_land_as_bound_rows_land(
    tmp_path: Path, rows: list[tuple[object, ...]], nulls: tuple[None, ...], upsert: bool
) -> None:
    # the first columns None in every row as often as not, as a batch's often are
    rows = [(k, *nulls, *rest)[:4] for k, *rest in rows]
    path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for name in ("ours", "oracle"):
        conn.execute(_TABLE.format(name=name))
    suffix = _UPSERT if upsert else " ON CONFLICT (k) DO NOTHING"
    ours = _INSERT.format(name="ours") + suffix
    tx = Transaction(conn)
    tx.defer(ours, rows)
    tx.flush()
    conn.executemany(_INSERT.format(name="oracle") + suffix, rows)
    assert (
        conn.execute("SELECT * FROM ours ORDER BY seq").fetchall()
        == conn.execute("SELECT * FROM oracle ORDER BY seq").fetchall()
    )
    conn.close()


def test_the_values_every_row_leaves_none_are_written_in() -> None:
    sql = "INSERT INTO t (k, a, b) VALUES (?, ?, ?)"
    sent, rows = without_nulls(sql, [("p", None, None), ("q", None, 3)])
    assert sent == "INSERT INTO t (k, a, b) VALUES (?, NULL, ?)"
    assert [tuple(row) for row in rows] == [("p", None), ("q", 3)]
    sent, rows = without_nulls(sql, [("p", None, None)])
    assert sent == "INSERT INTO t (k, a, b) VALUES (?, NULL, NULL)"
    assert [tuple(row) for row in rows] == [("p",)]
    unplain = "INSERT INTO t (k, a) VALUES (?, (SELECT max(a) FROM t) + ?)"
    assert without_nulls(unplain, [("p", None)]) == (unplain, [("p", None)])
    where = "INSERT INTO t (k, a) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET a = ? WHERE 1"
    assert without_nulls(where, [("p", None, None)])[0] == where


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    st.lists(st.tuples(_VALUE, _VALUE, _VALUE), max_size=700),
    st.sampled_from([(), (None,), (None, None), (None, None, None)]),
)
def test_rows_many_to_a_statement_land_as_bound_rows_land(
    tmp_path: Path, values: list[tuple[object, ...]], nulls: tuple[None, ...]
) -> None:
    """Rows marked distinct go many to a statement (``insert_many``), with the values
    every row leaves None written in: the same rows, numbered alike, past a
    statement's bound of parameters too."""
    rows = [(f"k{i}", *nulls, *rest)[:4] for i, rest in enumerate(values)]
    path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for name in ("ours", "oracle"):
        conn.execute(_TABLE.format(name=name))
    tx = Transaction(conn)
    tx.defer(_INSERT.format(name="ours"), rows,
             many=("INSERT INTO ours (k, a, b, c) VALUES", 4, ""))  # fmt: skip
    tx.flush()
    conn.executemany(_INSERT.format(name="oracle"), rows)
    assert (
        conn.execute("SELECT * FROM ours ORDER BY seq").fetchall()
        == conn.execute("SELECT * FROM oracle ORDER BY seq").fetchall()
    )
    conn.close()

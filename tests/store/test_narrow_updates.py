"""A next version (a supersession's closure, an invalidation, a soft delete, a
verification) rewrites only the columns it changes of the record's row on SQLite
(``Dialect.replace_later``'s ``columns``: SQLite rewrites the index entries of every
column an UPDATE sets, changed or not). The store is the same as when it rewrites the
whole row: two SQLite files on one clock, one written each way, hold the same rows in
every table after the same operations, in one batch or apart, and refuse the same;
each write's part of the change sequence (``scope_log``) names the same records."""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.raw import TABLES, dump_tables

import erstwhile
from erstwhile.domain.time import to_us
from erstwhile.store.sql import writes

START = datetime(2024, 1, 1, tzinfo=UTC)
IDS = [f"r{i}" for i in range(5)]  # written first, valid from day 0 to 4
NEW = [f"s{i}" for i in range(5)]
TABLE_NAMES = [*TABLES["sqlite"], "record_past", "past_tags", "past_meta", "lexical_tail"]
_files = itertools.count()

_OPS = st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(
        st.sampled_from(IDS + NEW), st.integers(10, 40), st.sampled_from([None, *IDS]),
        st.sampled_from(["a", "b"]),
    ), min_size=1, max_size=3, unique_by=lambda r: r[0])),
    st.tuples(st.just("invalidate"), st.sampled_from(IDS), st.integers(1, 60)),
    st.tuples(st.just("delete"), st.sampled_from(IDS)),
    st.tuples(st.just("verify"), st.sampled_from(IDS)),
)  # fmt: skip


def _at(days: int) -> str:
    return (START + timedelta(days=days)).isoformat()


def _apply(memory: erstwhile.Memory, op: tuple[Any, ...]) -> str:
    """What the operation did: "done", or the class of the error it was refused with."""
    try:
        if op[0] == "upsert":
            memory.upsert("ns", [
                {"id": rid, "content": f"{rid} says {word}", "tags": [word],
                 "metadata": {"room": word}, "valid_from": _at(day),
                 **({"supersedes": [old]} if old and old != rid else {})}
                for rid, day, old, word in op[1]
            ])  # fmt: skip
        elif op[0] == "invalidate":
            memory.invalidate("ns", op[1], _at(op[2]))
        elif op[0] == "delete":
            memory.delete("ns", op[1])
        else:
            memory.verify("ns", op[1], "alice")
    except erstwhile.ErstwhileError as error:
        return type(error).__name__
    return "done"


def _changed(target: str) -> list[int]:
    """The records in ``scope_log`` after the rows read by the last call, sorted."""
    conn = sqlite3.connect(target)
    try:
        seen = _SEEN.get(target, 0)
        rows = conn.execute("SELECT seq, record FROM scope_log WHERE seq > ?", (seen,)).fetchall()
    finally:
        conn.close()
    _SEEN[target] = max([seen, *(seq for seq, _ in rows)])
    return sorted(record for _, record in rows)


_SEEN: dict[str, int] = {}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(_OPS, min_size=1, max_size=8))
def test_rewriting_the_changed_columns_writes_what_rewriting_the_row_writes(
    tmp_path: Path, ops: list[tuple[Any, ...]]
) -> None:
    n = next(_files)
    targets = [str(tmp_path / f"narrow{n}.db"), str(tmp_path / f"whole{n}.db")]
    stores = [erstwhile.open(t, embedder="hash", background_jobs=False) for t in targets]
    clock = itertools.count(to_us(START + timedelta(days=3000)), 1_000_000)
    first = ("upsert", [(rid, i, None, "a") for i, rid in enumerate(IDS)])
    try:
        for op in [first, *ops]:
            now = next(clock)
            outcomes = []
            for memory, narrow in zip(stores, (True, False), strict=True):
                memory.service.clock = lambda now=now: now
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(writes, "NARROW_UPDATES", narrow)
                    outcomes.append(_apply(memory, op))
            assert outcomes[0] == outcomes[1], op
            # the change sequence: the same records changed by each write (a write's
            # rows in the order its statements ran, which the two ways group apart)
            changed = [_changed(t) for t in targets]
            assert changed[0] == changed[1], op
    finally:
        for memory in stores:
            memory.close()
    narrow, whole = (dump_tables(t, TABLE_NAMES) for t in targets)
    for name in TABLE_NAMES:
        assert narrow[name] == whole[name], name

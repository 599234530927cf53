"""SQLite holds back a batch's replacements of records rows (the past copy, the
rewrite, the scope rows' removal: ``Dialect.replace_later``) and sends them with the
batch's inserted rows, one statement per table, in rounds that keep each record's
order. The file they leave is the file the statement-by-statement way leaves: the
same rows in every table, the same past, the same answers as known at any instant."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.raw import dump_tables

import erstwhile
from erstwhile.domain.time import to_us
from erstwhile.store.sqlite.dialect import SqliteDialect

START = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["river", "stone", "mill", "cloud", "house"]
TABLES = ["records", "record_tags", "record_meta", "record_past", "ledger", "vectors",
          "lexical_docs", "lexical_terms", "lexical_stats"]  # fmt: skip
_names = itertools.count()


def _past(target: str) -> list[tuple[Any, ...]]:
    """record_past with its tag and metadata rows, each past row named by what it is
    (record, known range, version) rather than by its rowid, which the order of the
    copies decides."""
    rows = dump_tables(target, ["record_past", "past_tags", "past_meta"])
    named = {row[0]: row[1:] for row in rows["record_past"]}
    tags = sorted((named[r[2]], r[1]) for r in rows["past_tags"])
    meta = sorted((named[r[3]], r[1], r[2]) for r in rows["past_meta"])
    return [*sorted(named.values()), *tags, *meta]


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Two stores on one fixed clock: ``held`` as shipped, ``direct`` with every
    replacement made at once (the statement-by-statement way, as PostgreSQL does)."""
    held = erstwhile.open(str(tmp_path / "held.db"), embedder="hash", background_jobs=False)
    direct = erstwhile.open(str(tmp_path / "direct.db"), embedder="hash", background_jobs=False)
    dialect = direct.service.store.dialect  # type: ignore[attr-defined]
    assert isinstance(dialect, SqliteDialect)
    monkeypatch.setattr(dialect, "replace_later", lambda *args: False)
    clock = itertools.count(to_us(START + timedelta(days=400)), 1_000_000)
    yield {"held": held, "direct": direct, "clock": clock,
           "targets": (str(tmp_path / "held.db"), str(tmp_path / "direct.db"))}  # fmt: skip
    held.close()
    direct.close()


# each write: (id index, words, tag or None, supersedes an index or None)
write = st.tuples(
    st.integers(0, 7),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    st.one_of(st.none(), st.sampled_from(["a", "b"])),
    st.one_of(st.none(), st.integers(0, 7)),
)


def _batch(writes: list[tuple[int, str, str | None, int | None]], day: int) -> list[Any]:
    seen: set[str] = set()
    out = []
    for n, (index, content, tag, old) in enumerate(writes):
        rid = f"r{index}"
        if rid in seen:
            continue
        seen.add(rid)
        record: dict[str, Any] = {
            "id": rid, "content": content, "metadata": {"n": n},
            "valid_from": (START + timedelta(days=day + n)).isoformat(),
        }  # fmt: skip
        if tag is not None:
            record["tags"] = [tag]
        if old is not None and f"r{old}" != rid:
            record["supersedes"] = [f"r{old}"]
        out.append(record)
    return out


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(batches=st.lists(st.lists(write, min_size=1, max_size=10), min_size=1, max_size=3))
def test_held_back_replacements_leave_the_file_one_statement_at_a_time_leaves(
    pair: dict[str, Any], batches: list[list[tuple[int, str, str | None, int | None]]]
) -> None:
    """Records created and superseded in one batch, records of earlier batches
    superseded or rewritten (tags, metadata, content), refused batches (a fork, a
    validity that does not move forward): both stores hold the same rows and answer
    alike as known at each batch's instant."""
    namespace = f"n{next(_names)}"
    held, direct = pair["held"], pair["direct"]
    instants = []
    for day, writes in enumerate(batches):
        now = next(pair["clock"])
        instants.append(now)
        for m in (held, direct):
            m.service.clock = lambda now=now: now
        records = _batch(writes, 30 * day)
        outcome = []
        for m in (held, direct):
            try:
                outcome.append(m.upsert(namespace, records).versions)
            except erstwhile.ErstwhileError as error:
                outcome.append(type(error))
        assert outcome[0] == outcome[1]
    held_target, direct_target = pair["targets"]
    assert dump_tables(held_target, TABLES) == dump_tables(direct_target, TABLES)
    assert _past(held_target) == _past(direct_target)
    for at in instants:
        known = datetime.fromtimestamp(at / 1e6, tz=UTC).isoformat()
        answers = [
            [(h.record.id, h.record.version, h.record.tags, h.score) for h in m.search(
                namespace, "river stone", ranking="lexical", known_at=known,
                include_historical=True, top_k=20).hits]
            for m in (held, direct)
        ]  # fmt: skip
        assert answers[0] == answers[1]

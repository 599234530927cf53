"""The SQLite scope copy reuses a decided scope for a search that repeats its terms
(the same room, current) while no record's validity starts or ends in between, and
decides it anew after any write: over random records and sequences of instants, every
search through the copy returns what the SQL scope returns."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile

DAYS = [f"2024-01-{d:02d}T00:00:00Z" for d in range(1, 29)]
_RECORD = st.tuples(st.integers(0, 20), st.none() | st.integers(1, 7), st.sampled_from("ab"))


def _write(memory: erstwhile.Memory, records: list[tuple[int, int | None, str]], at: int) -> None:
    rows = []
    for i, (start, length, room) in enumerate(records):
        row: dict[str, Any] = {"id": f"m{at + i:03d}", "content": "river stone",
                               "metadata": {"room": room}, "valid_from": DAYS[start]}  # fmt: skip
        if length is not None:
            row["valid_to"] = DAYS[start + length]
        rows.append(row)
    memory.upsert("ns", rows)


def _ids(memory: erstwhile.Memory, **options: Any) -> list[str]:
    found = memory.search("ns", "river", ranking="semantic", top_k=100, **options)
    return sorted(found.ids())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_RECORD, min_size=1, max_size=30),
    later=st.lists(_RECORD, min_size=1, max_size=5),
    days=st.lists(st.integers(0, 27), min_size=2, max_size=8),
    room=st.none() | st.sampled_from("ab"),
)
def test_a_reused_scope_is_the_scope_sql_decides(
    records: list[tuple[int, int | None, str]],
    later: list[tuple[int, int | None, str]],
    days: list[int],
    room: str | None,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "store.db")
        copied = erstwhile.open(path, embedder="hash", background_jobs=False)
        copied.service.store.dialect._scopes.warm_after = 1  # type: ignore[attr-defined]
        in_sql = erstwhile.open(path, embedder="hash", background_jobs=False)
        in_sql.service.store.dialect._scopes.warm_after = 10**9  # type: ignore[attr-defined]
        try:
            _write(in_sql, records, 0)
            scope: dict[str, Any] = {"filter": {"room": room}} if room else {}
            for round_ in range(2):
                for day in [*days, *days]:  # each instant twice: the second reuses
                    options = {**scope, "as_of": DAYS[day]}
                    assert _ids(copied, **options) == _ids(in_sql, **options), (round_, day)
                assert _ids(copied, **scope) == _ids(in_sql, **scope)  # current
                _write(in_sql, later, len(records))  # the copy must decide anew
        finally:
            copied.close()
            in_sql.close()


def test_a_repeated_scope_is_reused_until_a_write(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    memory = erstwhile.open(path, embedder="hash", background_jobs=False)
    cache = memory.service.store.dialect._scopes  # type: ignore[attr-defined]
    cache.warm_after = 1
    try:
        _write(memory, [(0, None, "a"), (3, 2, "a"), (10, None, "b")], 0)
        assert _ids(memory, filter={"room": "a"}, as_of=DAYS[1]) == ["m000"]
        held = next(iter(cache._held.values()))
        assert held.until == 1_704_067_200_000_000 + 3 * 86_400_000_000  # m001 starts
        assert _ids(memory, filter={"room": "a"}, as_of=DAYS[2]) == ["m000"]
        assert len(cache._held) == 1 and next(iter(cache._held.values())) is held  # reused
        assert _ids(memory, filter={"room": "a"}, as_of=DAYS[3]) == ["m000", "m001"]
        assert _ids(memory, filter={"room": "a"}, as_of=DAYS[5]) == ["m000"]  # m001 ended
        _write(memory, [(0, None, "a")], 3)
        assert _ids(memory, filter={"room": "a"}, as_of=DAYS[5]) == ["m000", "m003"]
    finally:
        memory.close()

"""What the inspector reads besides search: a namespace's record counts by state and one
record id's ledger entries, on both backends."""

from __future__ import annotations

import contextlib
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.errors import NotFound
from erstwhile.domain.records import Record
from erstwhile.domain.time import format_instant, now_us, to_us

STATES = ("current", "future", "superseded", "invalidated", "deleted")
DAY = 86_400_000_000


def states_of(r: Record, now: int) -> set[str]:
    """Every state the record's own fields put it in at ``now`` (SPEC §3's rule for
    "valid at now"); a partition gives each record exactly one."""
    start = to_us(r.valid_from) if r.valid_from is not None else None
    end = to_us(r.valid_to) if r.valid_to is not None else None
    live = r.deleted_at is None
    closed = live and end is not None and end <= now
    return {
        state
        for state, holds in (
            ("current", live and start is not None and start <= now and not closed),
            ("future", live and start is not None and start > now),
            ("superseded", closed and r.superseded_by is not None),
            ("invalidated", closed and r.superseded_by is None),
            ("deleted", not live),
        )
        if holds
    }


def oracle(records: list[Record], now: int) -> dict[str, int]:
    """The counts, by reading each record's own fields."""
    found = [states_of(r, now) for r in records]
    counts = {"records": len(records)}
    counts.update({state: sum(state in each for each in found) for state in STATES})
    return counts


def test_record_counts_by_state(memory: erstwhile.Memory) -> None:
    ns = "counts"
    old = memory.add(ns, "Alice works at Acme", key="alice", valid_from="2023-01-01")
    new = memory.supersede(ns, old, {"content": "at Globex", "valid_from": "2024-06-01"}).ids[0]
    later = memory.add(ns, "moves to Berlin", valid_from="2099-01-01")
    memory.supersede(ns, later, {"content": "moves to Paris", "valid_from": "2099-06-01"})
    gone = memory.add(ns, "Carol on floor 3", valid_from="2023-08-01")
    memory.delete(ns, gone)
    closed = memory.add(ns, "Bob leads Apollo", valid_from="2023-03-01")
    memory.invalidate(ns, closed, at="2024-02-01")
    memory.add(ns, "ends next century", valid_from="2023-01-01", valid_to="2100-01-01")
    memory.add("other", "not counted here")

    store = memory.service.store
    now = now_us()
    ids = [e.record_id for e in store.ledger(ns) if e.op == "create"]
    found = oracle([store.get(ns, record_id) for record_id in dict.fromkeys(ids)], now)
    counts = store.record_counts(ns, now)
    assert counts == found
    # Berlin, superseded from 2099, is not closed yet: it and Paris are not yet valid
    assert counts == {"records": 7, "current": 2, "future": 2, "superseded": 1,
                      "invalidated": 1, "deleted": 1}  # fmt: skip
    assert memory.service.audit(ns)["records"] == counts
    assert store.get(ns, new).content == "at Globex"


# what becomes of a record after it is written: left open, written with its end
# (expired, or expiring later), superseded, invalidated, soft- or hard-deleted, or
# taken by an expire call (invalidate or soft_delete)
FATES = ("open", "ends", "supersede", "invalidate", "soft_delete", "hard_delete",
         "expire", "expire_delete")  # fmt: skip
PLAN = st.tuples(
    st.integers(-30, 30),  # valid_from, days from the test's start (past or future)
    st.integers(1, 20),  # days until its end, its successor or its invalidation
    st.sampled_from(FATES),
)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(plans=st.lists(PLAN, min_size=1, max_size=14), probes=st.lists(st.integers(0, 10**6)))
def test_record_counts_add_up_and_match_each_records_state(
    memory: erstwhile.Memory, plans: list[tuple[int, int, str]], probes: list[int]
) -> None:
    """Random records, past and future, in every state: at any instant, and at each
    record's own boundaries, every record is counted in exactly one state, the states
    add up to ``records``, and each count equals a count over the records' own fields."""
    ns = f"c{uuid.uuid4().hex[:10]}"
    base = now_us()
    at = lambda days: format_instant(base + days * DAY)  # noqa: E731
    written: list[str] = []
    for i, (start, step, fate) in enumerate(plans):
        fields = {"valid_from": at(start), "metadata": {"fate": fate}}
        if fate == "ends":
            fields["valid_to"] = at(start + step)
        rid = memory.add(ns, f"record {i}", **fields)
        written.append(rid)
        if fate == "supersede":
            successor = memory.supersede(ns, rid, {"content": f"after {i}",
                                                   "valid_from": at(start + step)})  # fmt: skip
            written.append(successor.ids[0])
        elif fate == "invalidate":
            memory.invalidate(ns, rid, at=at(start + step))
        elif fate in ("soft_delete", "hard_delete"):
            memory.delete(ns, rid, hard=fate == "hard_delete")
    memory.expire(ns, {"fate": "expire"}, action="invalidate", max_rows=100)
    memory.expire(ns, {"fate": "expire_delete"}, action="soft_delete", max_rows=100)

    store = memory.service.store
    records = []
    for rid in written:
        with contextlib.suppress(NotFound):  # hard-deleted: no longer in the namespace
            records.append(store.get(ns, rid))
    bounds = sorted({to_us(t) for r in records for t in (r.valid_from, r.valid_to) if t})
    instants = {base, *(b + d for b in bounds for d in (-1, 0, 1))}
    instants |= {base + (p - 500_000) * DAY // 10_000 for p in probes}
    for now in sorted(instants):
        counts = store.record_counts(ns, now)
        assert all(len(states_of(r, now)) == 1 for r in records)  # the oracle is a partition
        assert counts == oracle(records, now), format_instant(now)
        assert sum(counts[state] for state in STATES) == counts["records"]
    after = memory.service.audit(ns)["records"]  # the service asks at its own now
    assert after == oracle(records, now_us())


def test_ledger_of_one_record(memory: erstwhile.Memory) -> None:
    ns = "ledgered"
    first = memory.add(ns, "one", valid_from="2023-01-01")
    memory.add(ns, "unrelated")
    second = memory.supersede(ns, first, {"content": "two"}).ids[0]
    memory.verify(ns, second, "rita")
    memory.delete(ns, second, hard=True)

    entries = memory.service.ledger(ns, first)
    assert [e.op for e in entries] == ["create", "close"]
    assert entries[1].to_json()["detail"] == {"superseded_by": second}
    assert [e.op for e in memory.service.ledger(ns, second)] == ["create", "verify", "hard_delete"]
    assert "version" not in memory.service.ledger(ns, second)[-1].to_json()
    assert all(e.record_id == first for e in entries)
    try:
        memory.service.ledger(ns, "never-written")
        raise AssertionError("a record the ledger never saw is not found")
    except erstwhile.ErstwhileError as error:
        assert error.code == "erstwhile.not_found"

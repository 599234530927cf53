"""What the inspector reads besides search: a namespace's record counts by state and one
record id's ledger entries, on both backends."""

from __future__ import annotations

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.domain.time import now_us, to_us


def oracle(records: list[Record], now: int) -> dict[str, int]:
    """The counts, by reading each record's own fields."""

    def closed(r: Record) -> bool:
        return r.deleted_at is None and r.valid_to is not None and to_us(r.valid_to) <= now

    return {
        "records": len(records),
        "current": sum(
            r.deleted_at is None
            and to_us(r.valid_from) <= now
            and (r.valid_to is None or to_us(r.valid_to) > now)
            for r in records
            if r.valid_from is not None
        ),
        "superseded": sum(closed(r) and r.superseded_by is not None for r in records),
        "invalidated": sum(closed(r) and r.superseded_by is None for r in records),
        "deleted": sum(r.deleted_at is not None for r in records),
    }


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
    # Berlin, superseded from 2099, is not closed yet (nor valid yet): in no state count
    assert counts == {"records": 7, "current": 2, "superseded": 1, "invalidated": 1,
                      "deleted": 1}  # fmt: skip
    assert memory.service.audit(ns)["records"] == counts
    assert store.get(ns, new).content == "at Globex"


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

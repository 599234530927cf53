"""Writes as SPEC §4 states them, on every backend (a real SQLite file, a real
PostgreSQL database)."""

from __future__ import annotations

import pytest
from tests.support.raw import dump_tables, execute, full_text_matches, record_tables

import erstwhile
from erstwhile import Memory
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record


def test_supersession_at_t_leaves_exactly_one_record_valid(memory: Memory) -> None:
    old = memory.add("ns", "Alice works at Acme", valid_from="2023-01-01", key="alice.job")
    new = memory.supersede("ns", old, {"content": "Alice works at Globex",
                                       "valid_from": "2024-06-01T00:00:00Z"}).ids[0]  # fmt: skip
    for at, expected in [
        ("2024-06-01T00:00:00Z", [new]),
        ("2024-05-31T23:59:59.999999Z", [old]),
        ("2023-01-01", [old]),
        ("2022-12-31T23:59:59.999999Z", []),
    ]:
        assert memory.search("ns", "Alice works", as_of=at).ids() == expected, at
    closed = memory.get("ns", old)
    assert closed.valid_to == memory.get("ns", new).valid_from
    assert closed.superseded_by == new
    assert memory.get("ns", new).key == "alice.job"  # the key was handed over
    assert memory.get("ns", new).supersedes == [old]


def test_between_touching_a_boundary_does_not_overlap(memory: Memory) -> None:
    rid = memory.add("ns", "lease", valid_from="2024-01-01", valid_to="2024-02-01")
    touching_end = {"from": "2024-02-01", "until": "2024-03-01"}
    touching_start = {"from": "2023-12-01", "until": "2024-01-01"}
    inside = {"from": "2024-01-31T23:59:59.999999Z", "until": "2024-03-01"}
    assert memory.search("ns", "lease", between=touching_end).ids() == []
    assert memory.search("ns", "lease", between=touching_start).ids() == []
    assert memory.search("ns", "lease", between=inside).ids() == [rid]


def test_a_failed_batch_changes_nothing(memory: Memory, store_target: str) -> None:
    first = memory.upsert("ns", [
        {"id": "a", "content": "alpha", "tags": ["x"], "metadata": {"n": "1"}},
        {"id": "b", "content": "beta", "key": "k"},
    ])  # fmt: skip
    memory.supersede("ns", "b", {"id": "c", "content": "gamma"})
    before = dump_tables(store_target)
    with pytest.raises(erstwhile.VersionConflict) as error:
        memory.upsert("ns", [
            {"id": "a", "content": "alpha two", "if_version": first.versions[0]},
            {"id": "d", "content": "delta", "supersedes": ["a"]},
            {"id": "e", "content": "epsilon", "if_version": 0},
            {"id": "c", "content": "gamma two", "if_version": 7},
        ])  # fmt: skip
    assert error.value.code == "erstwhile.write.version_conflict"
    assert "records[3].if_version" in error.value.message
    assert dump_tables(store_target) == before


def test_hard_delete_leaves_no_trace(memory: Memory, store_target: str) -> None:
    rid = memory.add("ns", "secret plans for zanzibar", tags=["t"], metadata={"m": "1"})
    memory.upsert("ns", [{"id": rid, "content": "secret plans for zanzibar, revised"}])
    memory.service.store.set_embedding("ns", rid, "hash:test:3", __import__("numpy").ones(3),
                                       now=1, actor="local")  # fmt: skip
    memory.delete("ns", rid, hard=True)
    assert memory.search("ns", "zanzibar", include_historical=True).hits == []
    with pytest.raises(erstwhile.NotFound):
        memory.get("ns", rid)
    with pytest.raises(erstwhile.NotFound):
        memory.get("ns", rid, version=1)
    rows = dump_tables(store_target)
    for table in record_tables(store_target):
        assert rows[table] == [], table
    assert not any("zanzibar" in repr(row) for table in rows for row in rows[table])
    assert full_text_matches(store_target, "zanzibar") == 0
    # the id can be written again, from version 1
    assert memory.upsert("ns", [{"id": rid, "content": "new", "if_version": 0}]).versions == [1]


def test_versions_and_cas(memory: Memory) -> None:
    result = memory.upsert("ns", [{"id": "r", "content": "one", "if_version": 0}])
    assert result.versions == [1]
    with pytest.raises(erstwhile.VersionConflict):
        memory.upsert("ns", [{"id": "r", "content": "two", "if_version": 0}])
    assert memory.upsert("ns", [{"id": "r", "content": "two", "if_version": 1}]).versions == [2]
    assert memory.get("ns", "r", version=1).content == "one"
    assert memory.get("ns", "r").content == "two"
    with pytest.raises(erstwhile.NotFound):
        memory.get("ns", "r", version=3)


def test_soft_delete_hides_and_resurrection_restores(memory: Memory) -> None:
    rid = memory.add("ns", "ephemeral fact")
    memory.delete("ns", rid)
    assert memory.search("ns", "ephemeral").hits == []
    assert memory.search("ns", "ephemeral", include_historical=True).ids() == [rid]
    assert memory.get("ns", rid).deleted_at is not None
    memory.upsert("ns", [{"id": rid, "content": "ephemeral fact"}])
    assert memory.get("ns", rid).deleted_at is None
    assert memory.search("ns", "ephemeral").ids() == [rid]


def test_key_is_unique_among_current_live_records(memory: Memory) -> None:
    old = memory.add("ns", "blue", key="color")
    with pytest.raises(erstwhile.WriteConflict) as error:
        memory.add("ns", "red", key="color")
    assert "records[0].key" in error.value.message
    memory.supersede("ns", old, {"content": "red", "key": "color"})
    memory.invalidate("ns", memory.search("ns", "red").ids()[0])
    memory.add("ns", "green", key="color")  # the invalidated holder no longer holds it


def test_supersession_never_forks_and_unknown_ids_fail(memory: Memory) -> None:
    a = memory.add("ns", "v1", valid_from="2024-01-01")
    memory.supersede("ns", a, {"id": "b", "content": "v2", "valid_from": "2024-02-01"})
    with pytest.raises(erstwhile.WriteConflict) as error:
        memory.supersede("ns", a, {"id": "c", "content": "fork", "valid_from": "2024-03-01"})
    assert "already superseded by 'b'" in error.value.message
    with pytest.raises(erstwhile.NotFound):
        memory.supersede("ns", "nope", {"id": "d", "content": "x"})
    with pytest.raises(erstwhile.NotFound):
        memory.get("ns", "c")
    # self-references are ignored
    memory.upsert("ns", [{"id": "b", "content": "v2 again", "supersedes": ["b", a]}])
    assert memory.get("ns", a).superseded_by == "b"


def test_invalidate_closes_validity_without_a_replacement(memory: Memory) -> None:
    rid = memory.add("ns", "temporary", valid_from="2024-01-01")
    memory.invalidate("ns", rid, at="2024-03-01")
    record = memory.get("ns", rid)
    assert record.superseded_by is None
    assert memory.search("ns", "temporary").ids() == []
    assert memory.search("ns", "temporary", as_of="2024-02-01").ids() == [rid]
    with pytest.raises(erstwhile.InvalidInput):
        memory.invalidate("ns", memory.add("ns", "later", valid_from="2025-01-01"), at="2024-01-01")


def test_history_walks_both_ways_oldest_first(memory: Memory) -> None:
    a = memory.add("ns", "one", valid_from="2024-01-01")
    b = memory.supersede("ns", a, {"content": "two", "valid_from": "2024-02-01"}).ids[0]
    c = memory.supersede("ns", b, {"content": "three", "valid_from": "2024-03-01"}).ids[0]
    for member in (a, b, c):
        assert [r.id for r in memory.history("ns", member)] == [a, b, c]
    # a hard-deleted link ends the walk instead of failing
    memory.delete("ns", b, hard=True)
    assert [r.id for r in memory.history("ns", c)] == [c]


def test_history_is_cycle_safe(memory: Memory, store_target: str) -> None:
    a = memory.add("ns", "one")
    b = memory.supersede("ns", a, {"content": "two"}).ids[0]
    # corrupt the chain into a loop behind the store's back
    execute(store_target, "UPDATE records SET superseded_by = ? WHERE id = ?", (a, b))
    assert {r.id for r in memory.history("ns", a)} == {a, b}


def test_expire_is_bounded_and_needs_max_rows(memory: Memory) -> None:
    ids = [memory.add("ns", f"log line {i}", metadata={"kind": "log"}) for i in range(5)]
    keep = memory.add("ns", "log keep", metadata={"kind": "keep"})
    assert memory.expire("ns", filter={"kind": "log"}, action="soft_delete", max_rows=3) == 3
    assert set(memory.search("ns", "log").ids()) == {*ids[3:], keep}
    assert memory.expire("ns", filter={"kind": "log"}, action="hard_delete", max_rows=100) == 5
    assert memory.search("ns", "log", include_historical=True).ids() == [keep]
    with pytest.raises(erstwhile.InvalidInput) as error:
        memory.expire("ns", filter={"kind": "log"}, action="invalidate")
    assert "max_rows" in error.value.message
    with pytest.raises(erstwhile.InvalidInput):
        memory.expire("ns", filter={}, action="explode", max_rows=1)


def test_verify_promotes_trust_and_writes_reset_it(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="trust is set by the server"):
        memory.add("ns", "checked fact", trust="verified")  # asking is refused
    # a Record read back and written again carries trust: the write resets it
    rid = memory.upsert("ns", [Record(content="checked fact", trust="verified")]).ids[0]
    assert memory.get("ns", rid).trust == "unverified"  # a write cannot launder trust
    assert memory.search("ns", "checked", min_trust="verified").hits == []
    memory.verify("ns", rid, reviewer="alice")
    assert memory.get("ns", rid).trust == "verified"
    assert memory.search("ns", "checked", min_trust="verified").ids() == [rid]
    ledger = memory.service.store.ledger("ns")
    assert [e.op for e in ledger] == ["create", "verify"]
    memory.upsert("ns", [{"id": rid, "content": "checked fact, edited"}])
    assert memory.get("ns", rid).trust == "unverified"


def test_every_mutation_is_ledgered(memory: Memory) -> None:
    a = memory.add("ns", "one", valid_from="2024-01-01")
    b = memory.supersede("ns", a, {"content": "two"}).ids[0]
    memory.invalidate("ns", b)
    memory.delete("ns", a)
    memory.delete("ns", b, hard=True)
    ops = [(e.op, e.record_id, e.version) for e in memory.service.store.ledger("ns")]
    assert ops == [
        ("create", a, 1), ("close", a, 2), ("create", b, 1), ("invalidate", b, 2),
        ("delete", a, 3), ("hard_delete", b, None),
    ]  # fmt: skip
    assert all(e.actor == "local" for e in memory.service.store.ledger("ns"))


def test_payload_is_returned_only_when_asked(memory: Memory) -> None:
    rid = memory.add("ns", "with payload", payload=b"\x00\x01binary")
    plain = memory.search("ns", "payload").hits[0].record
    assert plain.payload is None
    full = memory.search("ns", "payload", include_payload=True).hits[0].record
    assert full.payload == b"\x00\x01binary"
    assert memory.get("ns", rid).payload == b"\x00\x01binary"
    only = memory.search("ns", "payload", ids_only=True).to_json()
    assert only["hits"] == [{"record": {"id": rid}, "score": only["hits"][0]["score"]}]

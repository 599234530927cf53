"""A batch's rows are held back and sent per table (SQLite: ``Transaction.defer``;
PostgreSQL: ``Connection.defer``): what that must never change, on every backend
(a real SQLite file, a real PostgreSQL database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from tests.support import pg
from tests.support.raw import backend_of, dump_tables, execute, scalar

import erstwhile
from erstwhile import Memory
from erstwhile.domain.errors import NotFound
from erstwhile.domain.records import Origin
from erstwhile.store.sql import maintenance

START = datetime(2024, 1, 1, tzinfo=UTC)
_REFUSE = {
    "sqlite": [
        "CREATE TRIGGER refuse AFTER INSERT ON ledger WHEN NEW.record_id = 'poison'"
        " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    ],
    "postgres": [
        "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN"
        " IF NEW.record_id = 'poison' THEN RAISE EXCEPTION 'refused by the test'; END IF;"
        " RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION refuse()",
    ],
    # Citus runs no triggers on distributed tables; a check constraint is enforced per
    # shard (its name is what the error says)
    "citus": [
        "ALTER TABLE ledger ADD CONSTRAINT \"refused by the test\" CHECK (record_id <> 'poison')",
    ],
}


def _batch(start: int, count: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(start)
    return [
        {"id": f"r{i}", "content": f"note {i} about topic {i % 7}", "tags": [f"t{i % 3}"],
         "metadata": {"room": f"room-{i % 4}"},
         "valid_from": (START + timedelta(minutes=i)).isoformat(),
         "vector": rng.standard_normal(256).tolist(),
         **({"supersedes": [f"r{i - 1}"]} if i % 10 == 9 else {})}
        for i in range(start, start + count)
    ]  # fmt: skip


def test_a_batch_refused_when_its_rows_are_sent_changes_nothing(
    memory: Memory, store_target: str
) -> None:
    """The last row of the batch is refused by the database when the held-back rows go
    out at the commit: every row of the batch, sent or held, is gone."""
    memory.upsert("ns", _batch(0, 50))
    for sql in _REFUSE["citus" if pg.on_citus(store_target) else backend_of(store_target)]:
        execute(store_target, sql)
    before = dump_tables(store_target)
    # new records, some superseding one of the batch before them (a statement between
    # held-back rows), a revision of a stored one, and last the refused one
    batch = [*_batch(50, 300), {"id": "r3", "content": "note 3 revised"},
             {"id": "poison", "content": "refused"}]  # fmt: skip
    with pytest.raises(Exception, match="refused by the test"):
        memory.upsert("ns", batch)
    assert dump_tables(store_target) == before
    # the store is usable after the refusal, and the same batch without the poison lands
    written = memory.upsert("ns", batch[:-1])
    assert len(written.ids) == 301
    assert memory.get("ns", "r3").content == "note 3 revised"
    assert memory.get("ns", "r58").superseded_by == "r59"
    hits = memory.search("ns", query_vector=batch[100]["vector"], top_k=1)  # type: ignore[arg-type]
    assert hits.ids() == ["r150"]


def test_rowids_drawn_ahead_are_never_reused(memory: Memory, store_target: str) -> None:
    """A hard-deleted record's rowid is not drawn again, not even when it was the
    highest (the scope copy and the vector matrix key derived rows by it)."""
    memory.upsert("ns", _batch(0, 5))
    top = scalar(store_target, "SELECT max(rowid) FROM records")
    memory.delete("ns", "r4", hard=True)
    memory.upsert("ns", _batch(5, 3))
    assert scalar(store_target, "SELECT count(*) FROM records") == 7
    fresh = "SELECT min(rowid) FROM records WHERE id IN ('r5', 'r6', 'r7')"
    assert scalar(store_target, fresh) > top


def test_every_version_reads_back_as_it_was_written(memory: Memory) -> None:
    """A record's versions are its row and the past rows that kept the ones it
    replaced: each version read by number, by the change feed and by export is the
    record as it read while current, every field of it (payload, origin, key, the
    instants), on every backend; the version numbers are listed once each."""
    written = [
        {"id": "a", "content": 'é\n"quoted"', "payload": b"\x00\x01",
         "metadata": {"a": "1", "b": "two"}, "tags": ["t", "u"], "kind": "fact", "key": "k",
         "source": "s", "origin": Origin(source="s", document="d", chunk=2),
         "valid_from": "1999-12-31T23:59:59.999999Z", "valid_to": "2030-01-01"},
        {"id": "a", "content": "second", "tags": []},  # a revision keeps what it leaves out
        {"id": "b", "content": "b one"},
    ]  # fmt: skip
    seen: dict[tuple[str, int], dict[str, object]] = {}

    def note(*ids: str) -> None:
        for rid in ids:
            current = memory.get("ns", rid)
            seen[(rid, current.version or 0)] = current.to_json()

    for record in written:
        memory.upsert("ns", [record])
        note(str(record["id"]))
    memory.verify("ns", "a", reviewer="me")
    memory.invalidate("ns", "b", at="2031-01-01")
    note("a", "b")
    memory.upsert("ns", [{"id": "c", "content": "c", "supersedes": ["b"]}])  # b closed again
    note("b", "c")
    memory.delete("ns", "c")  # a tombstone is a version too
    note("c")

    service = memory.service
    for rid in ("a", "b", "c"):
        numbers = service.store.versions("ns", rid)
        assert numbers == sorted(v for r, v in seen if r == rid)
        assert len(numbers) == len(set(numbers)) >= 2
        for version in numbers:
            assert memory.get("ns", rid, version=version).to_json() == seen[(rid, version)]
    with service.store.reader() as read:
        exported = [(r.id, r.version, r.to_json()) for r in maintenance.versions(read, "ns")]
    assert exported == sorted((r, v, body) for (r, v), body in seen.items())
    a1 = memory.get("ns", "a", version=1)
    assert (a1.payload, a1.key, a1.origin, a1.tags) == (
        b"\x00\x01",
        "k",
        Origin(source="s", document="d", chunk=2),
        ["t", "u"],
    )
    with pytest.raises(NotFound, match="has no version 9"):
        memory.get("ns", "a", version=9)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (float("nan"), "finite as float32"),
        (1e39, "finite as float32"),  # finite as float64, infinite as float32
        (None, "records[57].vector"),
        ("x", "records[57].vector"),
    ],
)
def test_a_batch_with_one_bad_vector_changes_nothing(
    memory: Memory, store_target: str, bad: object, says: str
) -> None:
    """A batch's vectors are checked together (one conversion for the batch): one bad
    value in one record refuses the whole batch, naming that record's field."""
    memory.upsert("ns", _batch(0, 5))
    before = dump_tables(store_target)
    batch = _batch(5, 100)
    vector = list(batch[57]["vector"])  # type: ignore[call-overload]
    vector[3] = bad
    batch[57]["vector"] = vector
    with pytest.raises(erstwhile.InvalidInput, match=r"records\[57\]\.vector") as error:
        memory.upsert("ns", batch)
    assert says in error.value.message
    assert dump_tables(store_target) == before


@pytest.mark.parametrize("what", ["zeros", "size"])
def test_a_batch_with_a_vector_of_no_direction_or_wrong_size_changes_nothing(
    memory: Memory, store_target: str, what: str
) -> None:
    before = dump_tables(store_target)
    batch = _batch(0, 20)
    batch[11]["vector"] = [0.0] * 256 if what == "zeros" else [1.0] * 255
    with pytest.raises(erstwhile.InvalidInput, match=r"records\[11\]\.vector"):
        memory.upsert("ns", batch)
    assert dump_tables(store_target) == before


def test_vectors_checked_together_are_stored_as_one_at_a_time(memory: Memory) -> None:
    """The batch path (floats only) and the one-at-a-time path (a vector of ints) store
    the same unit vectors: the same scores for the same query."""
    rng = np.random.default_rng(3)
    vectors = [rng.integers(-5, 5, 256) for _ in range(20)]
    memory.upsert("a", [{"id": f"v{i}", "content": "x", "vector": [float(x) for x in v]}
                        for i, v in enumerate(vectors)])  # fmt: skip
    memory.upsert("b", [{"id": f"v{i}", "content": "x", "vector": [int(x) for x in v]}
                        for i, v in enumerate(vectors)])  # fmt: skip
    query = rng.standard_normal(256).tolist()
    a = memory.search("a", query_vector=query, top_k=20, ranking="semantic")
    b = memory.search("b", query_vector=query, top_k=20, ranking="semantic")
    assert [(h.record.id, h.score) for h in a.hits] == [(h.record.id, h.score) for h in b.hits]


def test_a_batch_gives_each_record_its_own_vector_and_keeps_the_replaced_ones(
    memory: Memory, store_target: str
) -> None:
    """A batch's vectors go to the store together (SQLite: one statement for them
    all): each record gets its own; a rewrite replaces its record's vector, and a new
    content keeps the vector it replaces in the past."""
    rng = np.random.default_rng(11)
    first, second = rng.standard_normal((20, 256)), rng.standard_normal((30, 256))

    def body(i: int, version: int) -> str:
        return f"text {i} of {'the first' if version == 1 else 'another'} kind"

    memory.upsert("ns", [{"id": f"r{i}", "content": body(i, 1), "vector": first[i].tolist()}
                         for i in range(20)])  # fmt: skip
    # r0-r4: the same content, a new vector; r5-r9: a new content and vector; r20-r29 new
    changed = [*range(10), *range(20, 30)]
    memory.upsert("ns", [{"id": f"r{i}", "content": body(i, 1 if i < 5 else 2),
                          "vector": second[i].tolist()} for i in changed])  # fmt: skip

    def nearest(vector: np.ndarray) -> tuple[str, float]:
        hit = memory.search("ns", query_vector=vector.tolist(), top_k=1, ranking="semantic",
                            include_historical=True).hits[0]  # fmt: skip
        return hit.record.id, hit.score

    for i in range(30):
        if i in changed:
            found, score = nearest(second[i])
            assert found == f"r{i}" and score > 0.999
        if i < 20:
            found, score = nearest(first[i])
            assert (found == f"r{i}" and score > 0.999) == (i >= 10)
    assert scalar(store_target, "SELECT count(*) FROM vectors") == 30
    assert scalar(store_target, "SELECT count(*) FROM past_vectors") == 5

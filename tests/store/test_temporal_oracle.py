"""Random sequences of writes, checked search by search against a brute-force oracle.

The oracle below is written from SPEC §3-§6 alone: a dict of records and Python
comparisons. It shares no code with the store beyond the public API. It runs once per
backend (BACKENDS): each example gets a fresh SQLite file or PostgreSQL schema.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tests.support import pg

import erstwhile
from erstwhile.domain.time import format_instant

BACKENDS = ["sqlite", "postgres", "citus"]

DAY = 86_400 * 1_000_000
BASE = 1_577_836_800 * 1_000_000  # 2020-01-01T00:00:00Z
ENDED_NOW = 2**61  # stands for "now" at expire time: after every explicit instant
CURRENT = 2**62  # the instant a current search asks about: after ENDED_NOW

WORDS = ["apple", "river", "stone", "cloud", "ember"]
TAGS = ["a", "b", "c"]
ROOMS = ["r1", "r2", "r3"]
PRIORITIES = ["1", "2", "10", "x"]


def sometimes(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """A scope option that is absent three times in four, so most searches match something."""
    return st.one_of(st.none(), st.none(), st.none(), strategy)


def iso(day: int) -> str:
    return format_instant(BASE + day * DAY)


@dataclass
class Model:
    id: str
    content: str
    tags: list[str]
    meta: dict[str, str]
    kind: str
    valid_from: int
    valid_to: int | None = None
    deleted: bool = False
    superseded_by: str | None = None
    version: int = 1
    verified: bool = False


def number(text: str) -> float | None:
    try:
        return float(text) if text.lstrip("-").replace(".", "", 1).isdigit() else None
    except ValueError:
        return None


def predicate_holds(meta: dict[str, str], key: str, op: str, values: list[str]) -> bool:
    if key not in meta:
        return False
    stored = meta[key]
    if op == "EQ":
        return stored == values[0]
    if op == "NEQ":
        return stored != values[0]
    if op == "IN":
        return stored in values
    left, right = number(stored), float(values[0])
    if left is None:
        return False
    return {"GT": left > right, "GTE": left >= right, "LT": left < right, "LTE": left <= right}[op]


record_fields = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "room": st.sampled_from(ROOMS),
        "priority": st.sampled_from([*PRIORITIES, None]),
        "kind": st.sampled_from(["note", "fact"]),
        "valid_from": st.integers(0, 30),
        "length": st.one_of(st.none(), st.integers(1, 15)),
    }
)


class TemporalMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        target, self.cleanup = pg.fresh_target(self.backend)
        self.memory = erstwhile.open(target, embedder="hash", background_jobs=False)
        # A second handle on the same store writes now and then: the first one's
        # in-process copies (SQLite's vector matrix and scope columns) must see it.
        self.other = erstwhile.open(target, embedder="hash", background_jobs=False)
        scopes = getattr(self.memory.service.store.dialect, "_scopes", None)
        if scopes is not None:  # SQLite: the scope copy decides from the first search
            scopes.warm_after = 1
            # and every semantic search goes through the graph index (built in the
            # search): its candidates must be exactly the scope's too
            vectors = self.memory.service.store.dialect._vectors
            vectors.background, vectors.min_rows, vectors.min_share = False, 1, 0.0
        copies = getattr(self.memory.service.store.dialect, "copies", None)
        if copies is not None:  # PostgreSQL: the per-process copy answers from the first
            copies.warm_after = 1  # search, refreshed from the change log after each write
        self.model: dict[str, Model] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.memory.close()
        self.other.close()
        self.cleanup()

    @initialize(batch=st.lists(record_fields, min_size=4, max_size=14))
    def start(self, batch: list[dict]) -> None:
        """Starts from a populated namespace, written as one atomic batch."""
        writes = [self.as_write(self.next_id(), f) for f in batch]
        result = self.memory.upsert("ns", writes)
        assert result.ids == [w["id"] for w in writes]
        for write, f in zip(writes, batch, strict=True):
            self.model[write["id"]] = self.as_model(write, f)
        # The same records in a namespace no rule touches: nothing of it may leak into
        # "ns" (a leaked copy would show as a duplicate id or an out-of-scope hit).
        self.memory.upsert("shadow", writes)

    # -- helpers --------------------------------------------------------------

    def next_id(self) -> str:
        self.counter += 1
        return f"rec-{self.counter:03d}"

    @staticmethod
    def as_write(record_id: str, f: dict) -> dict:
        meta = {"room": f["room"]}
        if f["priority"] is not None:
            meta["priority"] = f["priority"]
        write = {
            "id": record_id,
            "content": " ".join(f["words"]),
            "tags": f["tags"],
            "metadata": meta,
            "kind": f["kind"],
            "valid_from": iso(f["valid_from"]),
        }
        write["valid_to"] = iso(f["valid_from"] + f["length"]) if f["length"] is not None else None
        return write

    @staticmethod
    def as_model(write: dict, f: dict) -> Model:
        return Model(
            id=write["id"],
            content=write["content"],
            tags=list(write["tags"]),
            meta=dict(write["metadata"]),
            kind=write["kind"],
            valid_from=BASE + f["valid_from"] * DAY,
            valid_to=BASE + (f["valid_from"] + f["length"]) * DAY if f["length"] else None,
        )

    def expect_error(self, code: str, call) -> None:  # type: ignore[no-untyped-def]
        try:
            call()
        except erstwhile.ErstwhileError as error:
            assert error.code == code, (error.code, code, error.message)
        else:
            raise AssertionError(f"expected {code}")

    # -- rules ----------------------------------------------------------------

    @rule(f=record_fields, through_other=st.booleans())
    def create(self, f: dict, through_other: bool) -> None:
        write = self.as_write(self.next_id(), f)
        result = (self.other if through_other else self.memory).upsert("ns", [write])
        assert result.versions == [1]
        self.model[write["id"]] = self.as_model(write, f)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), f=record_fields)
    def rewrite(self, data: st.DataObject, f: dict) -> None:
        old = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        write = self.as_write(old.id, f)
        new = self.as_model(write, f)
        moved = new.valid_from != old.valid_from
        has_predecessor = any(m.superseded_by == old.id for m in self.model.values())
        if old.superseded_by is not None:
            new.valid_to = old.valid_to  # the closure stays the store's
        if has_predecessor and moved:
            self.expect_error("erstwhile.input.invalid", lambda: self.memory.upsert("ns", [write]))
            return
        if new.valid_to is not None and new.valid_to <= new.valid_from:
            self.expect_error("erstwhile.input.invalid", lambda: self.memory.upsert("ns", [write]))
            return
        result = self.memory.upsert("ns", [write])
        assert result.versions == [old.version + 1]
        self.model[old.id] = replace(
            new,
            version=old.version + 1,
            superseded_by=old.superseded_by,
            deleted=False,
        )

    @precondition(lambda self: self.model)
    @rule(data=st.data(), f=record_fields)
    def supersede(self, data: st.DataObject, f: dict) -> None:
        old = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        write = self.as_write(self.next_id(), {**f, "length": None})
        new = self.as_model(write, {**f, "length": None})
        call = lambda: self.memory.supersede("ns", old.id, write)  # noqa: E731
        if old.superseded_by is not None or old.deleted:
            self.expect_error("erstwhile.write.conflict", call)
            return
        if new.valid_from <= old.valid_from:
            self.expect_error("erstwhile.input.invalid", call)
            return
        call()
        if old.valid_to is None or old.valid_to > new.valid_from:
            old.valid_to = new.valid_from
        old.superseded_by = new.id
        old.version += 1
        self.model[new.id] = new

    @precondition(lambda self: self.model)
    @rule(data=st.data(), day=st.integers(0, 50))
    def invalidate(self, data: st.DataObject, day: int) -> None:
        record = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        at = BASE + day * DAY
        call = lambda: self.memory.invalidate("ns", record.id, at=iso(day))  # noqa: E731
        if record.superseded_by is not None:
            self.expect_error("erstwhile.write.conflict", call)
        elif record.valid_to is not None and record.valid_to <= at:
            assert call() == record.version  # already over by then: nothing changes
        elif at <= record.valid_from:
            self.expect_error("erstwhile.input.invalid", call)
        else:
            call()
            record.valid_to = at
            record.version += 1

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def verify(self, data: st.DataObject) -> None:
        """Raises trust, through the other handle."""
        record = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        version = self.other.verify("ns", record.id, reviewer="oracle")
        if not record.verified:
            record.verified = True
            record.version += 1
        assert version == record.version

    @precondition(lambda self: self.model)
    @rule(data=st.data(), hard=st.booleans(), through_other=st.booleans())
    def delete(self, data: st.DataObject, hard: bool, through_other: bool) -> None:
        record = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        (self.other if through_other else self.memory).delete("ns", record.id, hard=hard)
        if hard:
            del self.model[record.id]
        elif not record.deleted:
            record.deleted = True
            record.version += 1

    @rule(
        room=st.sampled_from(ROOMS),
        action=st.sampled_from(["invalidate", "soft_delete", "hard_delete"]),
        max_rows=st.integers(1, 4),
    )
    def expire(self, room: str, action: str, max_rows: int) -> None:
        affected = self.memory.expire("ns", filter={"room": room}, action=action, max_rows=max_rows)
        # oldest first = creation order; ids here sort in creation order
        matching = [m for _, m in sorted(self.model.items()) if m.meta.get("room") == room]
        if action == "invalidate":
            matching = [
                m for m in matching
                if not m.deleted and m.superseded_by is None
                and (m.valid_to is None or m.valid_to > ENDED_NOW)
            ]  # fmt: skip
        elif action == "soft_delete":
            matching = [m for m in matching if not m.deleted]
        chosen = matching[:max_rows]
        assert affected == len(chosen)
        for m in chosen:
            if action == "invalidate":
                m.valid_to = ENDED_NOW
                m.version += 1
            elif action == "soft_delete":
                m.deleted = True
                m.version += 1
            else:
                del self.model[m.id]

    def boundary_days(self) -> list[int]:
        """Days on which some record starts or ends: where off-by-one bugs live."""
        days = set()
        for m in self.model.values():
            for instant in (m.valid_from, m.valid_to):
                if instant is not None and instant < ENDED_NOW:
                    days.add((instant - BASE) // DAY)
        return sorted(days)

    @rule(
        data=st.data(),
        word=st.sampled_from(WORDS),
        ranking=st.sampled_from(["lexical", "semantic"]),
        mode=st.sampled_from(["current", "historical", "as_of", "between"]),
        tag=sometimes(st.sampled_from(TAGS)),
        kind=sometimes(st.sampled_from(["note", "fact"])),
        verified=sometimes(st.just(True)),
        room=sometimes(st.sampled_from(ROOMS)),
        predicate=sometimes(
            st.tuples(
                st.sampled_from(["priority", "room"]),
                st.sampled_from(["EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN"]),
                st.lists(st.sampled_from(["1", "2", "10", "r1", "r2"]), min_size=1, max_size=2),
            )
        ),
    )
    def search(self, data, word, ranking, mode, tag, kind, verified, room, predicate) -> None:  # type: ignore[no-untyped-def]
        """Lexical: the records holding ``word``; semantic: every in-scope record (each
        has a vector and top_k exceeds the scope). Either way, exactly the scope."""
        day = st.integers(-2, 50)
        if self.boundary_days():
            edge = st.sampled_from(self.boundary_days())
            day = st.one_of(day, edge, edge, edge)
        options: dict = {"top_k": 1000, "ranking": ranking}
        window: tuple[int, int] | None
        if mode == "historical":
            options["include_historical"] = True
            window = None
        elif mode == "as_of":
            at = data.draw(day, label="as_of")
            options["as_of"] = iso(at)
            window = (BASE + at * DAY, BASE + at * DAY + 1)
        elif mode == "between":
            start = data.draw(day, label="from")
            end = data.draw(st.one_of(st.integers(start + 1, start + 20), day.filter(
                lambda d: d > start)), label="until")  # fmt: skip
            options["between"] = {"from": iso(start), "until": iso(end)}
            window = (BASE + start * DAY, BASE + end * DAY)
        else:
            window = (CURRENT, CURRENT + 1)
        if tag:
            options["tags"] = [tag]
        if kind:
            options["kind"] = kind
        if verified:
            options["min_trust"] = "verified"
        if room:
            options["filter"] = {"room": room}
        if predicate:
            key, op, values = predicate
            if op != "IN":
                values = values[:1]
            if op in ("GT", "GTE", "LT", "LTE") and number(values[0]) is None:
                self.expect_error(
                    "erstwhile.input.invalid",
                    lambda: self.memory.search("ns", word, predicates=[
                        {"key": key, "op": op, "values": values}], **options),
                )  # fmt: skip
                return
            options["predicates"] = [{"key": key, "op": op, "values": values}]

        def in_scope(m: Model) -> bool:
            if ranking == "lexical" and word not in m.content.split():
                return False
            if window is not None:
                start, end = window
                if m.deleted or not (
                    m.valid_from < end and (m.valid_to is None or m.valid_to > start)
                ):
                    return False
            if tag and tag not in m.tags:
                return False
            if kind and m.kind != kind:
                return False
            if verified and not m.verified:
                return False
            if room and m.meta.get("room") != room:
                return False
            return not (predicate and not predicate_holds(m.meta, key, op, values))

        expected = {m.id for m in self.model.values() if in_scope(m)}
        result = self.memory.search("ns", word, **options)
        got = [hit.record.id for hit in result.hits]
        assert len(got) == len(set(got))
        assert set(got) == expected, (options, sorted(expected), sorted(got))
        order = [(-hit.score, hit.record.id) for hit in result.hits]
        assert order == sorted(order), "hits must be ordered by score, ties by id"

    @invariant()
    def versions_match(self) -> None:
        for m in self.model.values():
            stored = self.memory.get("ns", m.id)
            assert stored.version == m.version, (m.id, stored.version, m.version)
            assert stored.superseded_by == m.superseded_by
            assert (stored.deleted_at is not None) == m.deleted


class PostgresTemporalMachine(TemporalMachine):
    backend = "postgres"


class CitusTemporalMachine(TemporalMachine):
    backend = "citus"  # the store distributed by namespace (tests/support/pg.py)


MACHINES = {
    "sqlite": TemporalMachine, "postgres": PostgresTemporalMachine, "citus": CitusTemporalMachine,
}  # fmt: skip
#: each Citus example creates and drops its schema's distributed tables (about a second)
EXAMPLES = {"sqlite": 100, "postgres": 100, "citus": 25}
assert list(MACHINES) == BACKENDS
for backend, machine in MACHINES.items():
    machine.TestCase.settings = settings(
        max_examples=EXAMPLES[backend],
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
test_temporal_oracle_sqlite = TemporalMachine.TestCase
test_temporal_oracle_postgres = pytest.mark.usefixtures("postgres_server")(
    PostgresTemporalMachine.TestCase
)
test_temporal_oracle_citus = pytest.mark.usefixtures("citus_server")(CitusTemporalMachine.TestCase)

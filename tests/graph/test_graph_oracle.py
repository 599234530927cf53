"""Random sequences of records, supersessions, invalidations, deletes, asserted facts
and extraction sweeps, checked against a brute-force oracle of which edges are valid
at a random instant and which records expansion appends. Once per backend.

The oracle is written from SPEC §3, §6 and §8 alone: dicts and Python comparisons.
Records say "<A> uses <B>." (the heuristic reads one fact per sentence); names are
short and far apart, so resolution never merges two of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from tests.support.pg import fresh_target

import erstwhile
from erstwhile.domain.time import Window, format_instant

NS = "ns"
DAY = 86_400 * 1_000_000
BASE = 1_577_836_800 * 1_000_000  # 2020-01-01T00:00:00Z
NAMES = ["Ada", "Bob", "Cyd", "Dee"]

pairs = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES)), min_size=1,
                 max_size=2)  # fmt: skip


def at(day: int) -> int:
    return BASE + day * DAY


@dataclass
class Rec:
    id: str
    facts: list[tuple[str, str]]
    valid_from: int
    tagged: bool
    valid_to: int | None = None
    deleted: bool = False
    superseded: bool = False
    extracted: bool = False

    @property
    def names(self) -> set[str]:
        return {name for pair in self.facts for name in pair}

    def content(self) -> str:
        return " ".join(f"{a} uses {b}." for a, b in self.facts)

    def valid_at(self, t: int | None) -> bool:
        if self.deleted:
            return False
        if t is None:  # current: every instant here is in the past
            return self.valid_to is None
        return self.valid_from <= t and (self.valid_to is None or self.valid_to > t)


@dataclass
class Edge:
    subject: str
    predicate: str
    object: str
    valid_from: int
    record: str | None
    valid_to: int | None = None

    def valid_at(self, t: int | None) -> bool:
        if t is None:
            return self.valid_to is None
        return self.valid_from <= t and (self.valid_to is None or self.valid_to > t)


@dataclass
class Oracle:
    records: dict[str, Rec] = field(default_factory=dict)  # in creation (rowid) order
    edges: list[Edge] = field(default_factory=list)
    asserted: set[tuple[str, str, int]] = field(default_factory=set)

    def extract(self) -> None:
        """The job: sweep, read what is current and unread, sweep again."""
        for edge in self.edges:
            record = self.records.get(edge.record or "")
            if record is not None and edge.valid_to is None and record.valid_to is not None:
                edge.valid_to = record.valid_to
        for record in self.records.values():
            if record.valid_at(None) and not record.extracted:
                record.extracted = True
                # a fact stated twice by one record is one edge (its id is the fact's)
                self.edges += [Edge(a, "uses", b, record.valid_from, record.id)
                               for a, b in dict.fromkeys(record.facts) if a != b]  # fmt: skip

    def mentioned(self, record: Rec) -> set[str]:
        return record.names if record.extracted else set()

    def appended(self, direct: set[str], t: int | None, tagged: bool) -> set[str]:
        near = set().union(*(self.mentioned(self.records[i]) for i in direct))
        far = set()
        for edge in self.edges:
            if edge.valid_at(t):
                if edge.subject in near:
                    far.add(edge.object)
                if edge.object in near:
                    far.add(edge.subject)
        return {
            r.id for r in self.records.values()
            if r.id not in direct and r.valid_at(t) and (r.tagged or not tagged)
            and self.mentioned(r) & far
        }  # fmt: skip


class GraphMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        target, self.cleanup = fresh_target(self.backend)
        self.m = erstwhile.open(target, embedder="none", extractor="heuristic",
                                background_jobs=False)  # fmt: skip
        self.oracle = Oracle()
        self.counter = 0

    def teardown(self) -> None:
        self.m.close()
        self.cleanup()

    def live(self) -> list[Rec]:
        """Records that may be superseded or invalidated: current, not deleted."""
        return [r for r in self.oracle.records.values() if r.valid_at(None)]

    def _new(self, facts: list[tuple[str, str]], valid_from: int, tagged: bool) -> Rec:
        self.counter += 1
        return Rec(f"r{self.counter:03d}", facts, valid_from, tagged)

    def _write(self, record: Rec) -> dict[str, object]:
        return {"id": record.id, "content": record.content(), "tags": ["t"] if record.tagged
                else [], "valid_from": format_instant(record.valid_from)}  # fmt: skip

    # -- rules ----------------------------------------------------------------

    @initialize(batch=st.lists(st.tuples(pairs, st.integers(0, 30), st.booleans()), min_size=3,
                               max_size=10))  # fmt: skip
    def start(self, batch: list[tuple[list[tuple[str, str]], int, bool]]) -> None:
        """Starts from a populated, extracted namespace."""
        records = [self._new(facts, at(day), tagged) for facts, day, tagged in batch]
        self.m.upsert(NS, [self._write(r) for r in records])
        self.oracle.records.update((r.id, r) for r in records)
        self.extract()

    @rule(facts=pairs, day=st.integers(0, 30), tagged=st.booleans())
    def create(self, facts: list[tuple[str, str]], day: int, tagged: bool) -> None:
        record = self._new(facts, at(day), tagged)
        self.m.upsert(NS, [self._write(record)])
        self.oracle.records[record.id] = record

    @precondition(lambda self: self.live())
    @rule(data=st.data(), facts=pairs, gap=st.integers(1, 10), tagged=st.booleans())
    def supersede(self, data: st.DataObject, facts: list[tuple[str, str]], gap: int,
                  tagged: bool) -> None:  # fmt: skip
        old = data.draw(st.sampled_from(self.live()))
        new = self._new(facts, old.valid_from + gap * DAY, tagged)
        self.m.supersede(NS, old.id, self._write(new))
        old.valid_to, old.superseded = new.valid_from, True
        self.oracle.records[new.id] = new

    @precondition(lambda self: self.live())
    @rule(data=st.data(), gap=st.integers(1, 10))
    def invalidate(self, data: st.DataObject, gap: int) -> None:
        record = data.draw(st.sampled_from(self.live()))
        record.valid_to = record.valid_from + gap * DAY
        self.m.invalidate(NS, record.id, at=format_instant(record.valid_to))

    @precondition(lambda self: self.oracle.records)
    @rule(data=st.data(), hard=st.booleans())
    def delete(self, data: st.DataObject, hard: bool) -> None:
        record = data.draw(st.sampled_from(list(self.oracle.records.values())))
        self.m.delete(NS, record.id, hard=hard)
        if hard:
            del self.oracle.records[record.id]
            self.oracle.edges = [e for e in self.oracle.edges if e.record != record.id]
        else:
            record.deleted = True

    @rule(subject=st.sampled_from(NAMES), object=st.sampled_from(NAMES), day=st.integers(0, 40))
    def assert_fact(self, subject: str, object: str, day: int) -> None:
        if subject == object:
            with pytest.raises(erstwhile.InvalidInput):
                self.m.assert_fact(NS, subject, "likes", object)
            return
        self.m.assert_fact(NS, subject, "likes", object, valid_from=format_instant(at(day)))
        if (subject, object, day) not in self.oracle.asserted:
            self.oracle.asserted.add((subject, object, day))
            self.oracle.edges.append(Edge(subject, "likes", object, at(day), None))

    @rule()
    def extract(self) -> None:
        self.m.extract(NS)
        self.oracle.extract()

    # -- checks ---------------------------------------------------------------

    @rule(day=st.one_of(st.none(), st.integers(0, 45)), name=st.sampled_from(NAMES),
          tagged=st.booleans())  # fmt: skip
    def check(self, day: int | None, name: str, tagged: bool) -> None:
        t = None if day is None else at(day)
        graph = self.m.service.store.graph
        names = {e.id: e.name for e in graph.known(NS)}
        window = Window.point(t if t is not None else at(10_000))
        stored = Counter(
            (names[e.subject], e.predicate, names[e.object],
             e.provenance["record"] if e.provenance else None)
            for e in graph.relationships(NS, None, window)
        )  # fmt: skip
        expected = Counter(
            (e.subject, e.predicate, e.object, e.record)
            for e in self.oracle.edges if e.valid_at(t)
        )  # fmt: skip
        assert stored == expected, (day, stored, expected)

        options: dict[str, object] = {"ranking": "lexical", "top_k": 100}
        if t is not None:
            options["as_of"] = format_instant(t)
        if tagged:
            options["tags"] = ["t"]
        plain = self.m.search(NS, name, **options)
        direct = {
            r.id for r in self.oracle.records.values()
            if name in r.names and r.valid_at(t) and (r.tagged or not tagged)
        }  # fmt: skip
        assert set(plain.ids()) == direct
        result = self.m.search(NS, name, expand={"hops": 1, "limit": 100}, **options)
        assert result.hits[: len(plain.hits)] == plain.hits  # direct hits unchanged
        appended = result.hits[len(plain.hits) :]
        assert {h.record.id for h in appended} == self.oracle.appended(direct, t, tagged)
        edge_ids = {e.id for e in graph.relationships(NS, None, window)}
        for hit in appended:
            assert hit.signals["graph"]["hops"] == 1 and hit.signals["graph"]["from"] in direct
            mentioned = self.oracle.mentioned(self.oracle.records[hit.record.id])
            for via in hit.via:
                assert via["edge"] in edge_ids and names[via["entity"]] in mentioned


class PostgresGraphMachine(GraphMachine):
    backend = "postgres"


for machine in (GraphMachine, PostgresGraphMachine):
    machine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
test_graph_oracle_sqlite = GraphMachine.TestCase
test_graph_oracle_postgres = pytest.mark.usefixtures("postgres_server")(
    PostgresGraphMachine.TestCase
)

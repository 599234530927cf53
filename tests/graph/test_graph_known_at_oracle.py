"""Graph expansion as known at a past instant (``known_at`` + ``expand``), checked
against snapshots of the whole store, records and graph. Once per backend.

A state machine interleaves record writes (create, rewrite in place, supersede,
invalidate, soft and hard delete), asserted facts and extraction jobs (whose sweeps
close edges and whose re-reads of rewritten records retract mentions and edges) on a
controllable clock, one step per instant, and after every step copies what the store
then holds: every record, every mention and every edge with its validity. A check
picks a past instant T and runs a ``known_at=T`` search with one hop of expansion:
the records it appends must be those a brute-force walk of the snapshot taken at T
reaches (mentions of the direct hits, edges valid in the search's window, mentions
of the far entities, records in scope), less what was hard-deleted since, whose
mentions and edges are gone from the past too (SPEC §1.3). Another rule exports the
store, imports the export into a fresh store and runs the same checks there: a backup
keeps the graph's record time (and exports the same bytes again).
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from tests.store.test_known_at_oracle import plain
from tests.support.pg import fresh_target

import erstwhile
from erstwhile import backups
from erstwhile.domain.graph import Mention, Relationship
from erstwhile.domain.records import Record
from erstwhile.domain.time import format_instant, to_us

NS = "ns"
DAY = 86_400 * 1_000_000
BASE = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z: the clock starts here
#: validity instants are days before BASE, so records are current when written
#: (and so extracted) unless invalidated or superseded
FIRST = BASE - 60 * DAY
NAMES = ["Ada", "Bob", "Cyd", "Dee", "Eve", "Fay", "Gus", "Hal"]

#: one fact a record, among enough names that the walk does not reach everything
facts = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES)), min_size=1, max_size=1)


def content(pairs: list[tuple[str, str]]) -> str:
    return " ".join(f"{a} uses {b}." for a, b in pairs)


@dataclass(frozen=True)
class Snapshot:
    taken: int
    records: dict[str, Record]
    mentions: list[Mention]
    edges: list[Relationship]


def valid_in(start: int, end: int | None, window: tuple[int, int]) -> bool:
    return start < window[1] and (end is None or end > window[0])


def in_scope(record: Record, window: tuple[int, int], tagged: bool) -> bool:
    assert record.valid_from is not None
    valid_to = None if record.valid_to is None else to_us(record.valid_to)
    return (
        record.deleted_at is None
        and valid_in(to_us(record.valid_from), valid_to, window)
        and ("t" in record.tags or not tagged)
    )


class GraphKnownAtMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        target, self.cleanup = fresh_target(self.backend)
        self.m = erstwhile.open(target, embedder="none", extractor="heuristic",
                                background_jobs=False)  # fmt: skip
        self.now = BASE
        self.m.service.clock = lambda: self.now
        self.ids: list[str] = []
        self.gone: set[str] = set()  # hard-deleted
        self.snapshots: list[Snapshot] = []
        self.counter = 0

    def teardown(self) -> None:
        self.m.close()
        self.cleanup()

    def step(self, write) -> None:  # type: ignore[no-untyped-def]
        """Runs one write at the next instant, then snapshots records and graph."""
        self.now += DAY // 2 + self.counter  # distinct instants
        with contextlib.suppress(erstwhile.ErstwhileError):
            write()
        records = {}
        for record_id in self.ids:
            if record_id not in self.gone:
                with contextlib.suppress(erstwhile.ErstwhileError):
                    records[record_id] = self.m.get(NS, record_id)
        graph = self.m.service.store.graph
        self.snapshots.append(
            Snapshot(self.now, records, graph.mentions(NS), graph.relationships(NS, None, None))
        )

    def live(self) -> list[str]:
        return [i for i in self.ids if i not in self.gone]

    def write(self, record_id: str, pairs: list[tuple[str, str]], day: int, tagged: bool) -> dict:
        return {"id": record_id, "content": content(pairs), "tags": ["t"] if tagged else [],
                "valid_from": format_instant(FIRST + day * DAY)}  # fmt: skip

    def new_id(self) -> str:
        self.counter += 1
        record_id = f"r{self.counter:03d}"
        self.ids.append(record_id)
        return record_id

    # -- writes -------------------------------------------------------------------------

    @initialize(batch=st.lists(st.tuples(facts, st.integers(0, 30), st.booleans()),
                               min_size=3, max_size=8))  # fmt: skip
    def start(self, batch: list) -> None:  # type: ignore[type-arg]
        writes = [self.write(self.new_id(), *item) for item in batch]
        self.step(lambda: self.m.upsert(NS, writes))
        self.step(lambda: self.m.extract(NS))

    @rule(pairs=facts, day=st.integers(0, 30), tagged=st.booleans())
    def create(self, pairs: list[tuple[str, str]], day: int, tagged: bool) -> None:
        write = self.write(self.new_id(), pairs, day, tagged)
        self.step(lambda: self.m.upsert(NS, [write]))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), pairs=facts, tagged=st.booleans())
    def rewrite(self, data: st.DataObject, pairs: list[tuple[str, str]], tagged: bool) -> None:
        """New content in place: the next extraction retracts what the old one said."""
        write = self.write(data.draw(st.sampled_from(self.live())), pairs, 0, tagged)
        write.pop("valid_from")
        self.step(lambda: self.m.upsert(NS, [write]))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), pairs=facts, day=st.integers(0, 40), tagged=st.booleans())
    def supersede(self, data: st.DataObject, pairs: list[tuple[str, str]], day: int,
                  tagged: bool) -> None:  # fmt: skip
        old = data.draw(st.sampled_from(self.live()))
        write = self.write(self.new_id(), pairs, day, tagged)
        self.step(lambda: self.m.supersede(NS, old, write))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), day=st.integers(0, 40))
    def invalidate(self, data: st.DataObject, day: int) -> None:
        record_id = data.draw(st.sampled_from(self.live()))
        at = format_instant(FIRST + day * DAY)
        self.step(lambda: self.m.invalidate(NS, record_id, at=at))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), hard=st.booleans())
    def delete(self, data: st.DataObject, hard: bool) -> None:
        record_id = data.draw(st.sampled_from(self.live()))
        if hard:
            self.gone.add(record_id)
        self.step(lambda: self.m.delete(NS, record_id, hard=hard))

    @rule(subject=st.sampled_from(NAMES), object=st.sampled_from(NAMES), day=st.integers(0, 40))
    def assert_fact(self, subject: str, object: str, day: int) -> None:
        at = format_instant(FIRST + day * DAY)
        self.step(lambda: self.m.assert_fact(NS, subject, "likes", object, valid_from=at))

    @rule()
    def extract(self) -> None:
        self.step(lambda: self.m.extract(NS))

    # -- the check ---------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        as_of=st.one_of(st.none(), st.integers(0, 60)),
        tagged=st.booleans(),
        offset=st.integers(0, DAY // 4),
    )
    def expand_in_the_past(self, name: str, as_of: int | None, tagged: bool,
                           offset: int) -> None:  # fmt: skip
        """The same search put back to each instant so far, each against its snapshot."""
        for snapshot in self.snapshots:
            self.check(self.m, snapshot, snapshot.taken + offset, name, as_of, tagged)

    @precondition(lambda self: len(self.snapshots) > 2)
    @rule(name=st.sampled_from(NAMES), offset=st.integers(0, DAY // 4))
    def restored(self, name: str, offset: int) -> None:
        """An export imported into a fresh store answers every past instant the same."""
        text = "".join(line + "\n" for line in backups.export_lines(self.m))
        target, cleanup = fresh_target(self.backend)
        try:
            with (
                tempfile.TemporaryDirectory() as directory,
                erstwhile.open(target, embedder="none", background_jobs=False) as restored,
            ):
                path = Path(directory) / "export.jsonl"
                path.write_text(text, encoding="utf-8")
                backups.import_export(restored, path)
                again = "".join(line + "\n" for line in backups.export_lines(restored))
                assert again == text
                for snapshot in self.snapshots:
                    self.check(restored, snapshot, snapshot.taken + offset, name, None, False)
        finally:
            cleanup()

    def check(self, m: erstwhile.Memory, snapshot: Snapshot, known_at: int, name: str,
              as_of: int | None, tagged: bool) -> None:  # fmt: skip
        options: dict = {"ranking": "lexical", "top_k": 100, "known_at": format_instant(known_at)}
        point = known_at if as_of is None else FIRST + as_of * DAY
        window = (point, point + 1)
        if as_of is not None:
            options["as_of"] = format_instant(point)
        if tagged:
            options["tags"] = ["t"]
        alone = m.search(NS, name, **options)
        result = m.search(NS, name, expand={"hops": 1, "limit": 100}, **options)
        assert result.hits[: len(alone.hits)] == alone.hits  # direct hits unchanged
        appended = result.hits[len(alone.hits) :]
        direct = set(alone.ids())

        # the walk, by brute force over the snapshot, less what was hard-deleted since
        records = {i: r for i, r in snapshot.records.items() if i not in self.gone}
        mentions = [m for m in snapshot.mentions if m.record in records]
        edges = [
            e for e in snapshot.edges
            if not (e.provenance and e.provenance.get("record") in self.gone)
            and valid_in(e.valid_from, e.valid_to, window)
        ]  # fmt: skip
        near = {m.entity for m in mentions if m.record in direct}
        far = {e.object for e in edges if e.subject in near}
        far |= {e.subject for e in edges if e.object in near}
        expected = {
            m.record for m in mentions
            if m.entity in far and m.record not in direct
            and in_scope(records[m.record], window, tagged)
        }  # fmt: skip
        assert {h.record.id for h in appended} == expected, (options, expected)
        edge_ids = {e.id for e in edges}
        for hit in appended:
            assert plain(hit.record) == plain(records[hit.record.id])
            assert hit.signals["graph"]["from"] in direct
            for via in hit.via:
                assert via["edge"] in edge_ids and via["entity"] in far


class PostgresGraphKnownAtMachine(GraphKnownAtMachine):
    backend = "postgres"


for machine, examples in ((GraphKnownAtMachine, 40), (PostgresGraphKnownAtMachine, 15)):
    machine.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
test_graph_known_at_oracle_sqlite = GraphKnownAtMachine.TestCase
test_graph_known_at_oracle_postgres = pytest.mark.usefixtures("postgres_server")(
    PostgresGraphKnownAtMachine.TestCase
)

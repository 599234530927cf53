"""Record-time travel (``known_at``) checked against snapshots of the whole store.

A state machine interleaves writes (create, rewrite in place, supersede, invalidate,
soft delete, verify, hard delete) on a controllable clock, one step per instant, and
after every step copies every record as the store then holds it (the snapshot). A
check then picks a past instant T and runs a ``known_at=T`` search (every lane,
random validity modes and filters) and a ``known_at=T`` get: each must answer what the
same question, asked by brute force of the snapshot taken at T, answers — less the
records hard-deleted since, which are gone from the past too (SPEC §1.3). Semantic
scores are recomputed from the hash embedder, so a version whose content changed
later must still be ranked by its own vector; lexical scores are BM25 of the version's
own words with the namespace's statistics of now. Runs once per backend.
"""

from __future__ import annotations

import contextlib
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from tests.store.test_temporal_oracle import predicate_holds, sometimes
from tests.support import pg

import erstwhile
from erstwhile.domain.fusion import reciprocal_rank_fusion
from erstwhile.domain.records import Record
from erstwhile.domain.time import format_instant, to_us

DAY = 86_400 * 1_000_000
BASE = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z
WORDS = ["apple", "river", "stone", "cloud"]
TAGS = ["a", "b"]
ROOMS = ["r1", "r2"]

fields = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "room": st.sampled_from(ROOMS),
        "priority": st.sampled_from(["1", "5", None]),
        "kind": st.sampled_from(["note", "fact"]),
        "valid_from": st.integers(-5, 40),
    }
)


def as_write(record_id: str, f: dict) -> dict:
    meta = {"room": f["room"]}
    if f["priority"] is not None:
        meta["priority"] = f["priority"]
    return {
        "id": record_id,
        "content": " ".join(f["words"]),
        "tags": f["tags"],
        "metadata": meta,
        "kind": f["kind"],
        "valid_from": format_instant(BASE + f["valid_from"] * DAY),
    }


def overlaps(record: Record, window: tuple[int, int] | None) -> bool:
    if window is None:
        return True
    start, end = window
    assert record.valid_from is not None
    valid_to = None if record.valid_to is None else to_us(record.valid_to)
    return (
        record.deleted_at is None
        and to_us(record.valid_from) < end
        and (valid_to is None or valid_to > start)
    )


def plain(record: Record) -> dict:
    return record.model_copy(update={"known_until": None, "payload": None}).to_json()


class KnownAtMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        target, self.cleanup = pg.fresh_target(self.backend)
        self.memory = erstwhile.open(target, embedder="hash", background_jobs=False)
        self.now = BASE
        self.memory.service.clock = lambda: self.now
        self.embedder = self.memory.service.embedder_for("ns")
        self.ids: list[str] = []  # every id ever written, oldest first
        self.gone: set[str] = set()  # hard-deleted
        self.snapshots: list[tuple[int, dict[str, Record]]] = []
        self.counter = 0

    def teardown(self) -> None:
        self.memory.close()
        self.cleanup()

    # -- the clock and the snapshots -------------------------------------------------

    def step(self, write) -> None:  # type: ignore[no-untyped-def]
        """Runs one write at the next instant, then snapshots the whole store."""
        self.now += DAY // 2 + self.counter  # distinct instants, never round
        with contextlib.suppress(erstwhile.ErstwhileError):
            write()  # a refused write changes nothing; the snapshot shows that
        snapshot = {}
        for record_id in self.ids:
            if record_id not in self.gone:
                # (an id whose write was refused was never recorded)
                with contextlib.suppress(erstwhile.ErstwhileError):
                    snapshot[record_id] = self.memory.get("ns", record_id)
        self.snapshots.append((self.now, snapshot))

    def live(self) -> list[str]:
        return [i for i in self.ids if i not in self.gone]

    def new_id(self) -> str:
        self.counter += 1
        return f"k{self.counter:03d}"

    # -- writes -------------------------------------------------------------------------

    @initialize(batch=st.lists(fields, min_size=2, max_size=6))
    def start(self, batch: list[dict]) -> None:
        writes = [as_write(self.new_id(), f) for f in batch]
        self.ids += [w["id"] for w in writes]
        self.step(lambda: self.memory.upsert("ns", writes))

    @rule(f=fields)
    def create(self, f: dict) -> None:
        record_id = self.new_id()
        self.ids.append(record_id)
        self.step(lambda: self.memory.upsert("ns", [as_write(record_id, f)]))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), f=fields)
    def rewrite(self, data: st.DataObject, f: dict) -> None:
        """The same id written again: a new version, usually with new content."""
        record_id = data.draw(st.sampled_from(self.live()))
        write = as_write(record_id, f)
        write.pop("valid_from")
        self.step(lambda: self.memory.upsert("ns", [write]))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), f=fields)
    def supersede(self, data: st.DataObject, f: dict) -> None:
        old = data.draw(st.sampled_from(self.live()))
        new = self.new_id()
        self.ids.append(new)
        self.step(lambda: self.memory.supersede("ns", old, as_write(new, f)))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), day=st.integers(-5, 60))
    def invalidate(self, data: st.DataObject, day: int) -> None:
        record_id = data.draw(st.sampled_from(self.live()))
        at = format_instant(BASE + day * DAY)
        self.step(lambda: self.memory.invalidate("ns", record_id, at=at))

    @precondition(lambda self: self.live())
    @rule(data=st.data(), hard=st.booleans())
    def delete(self, data: st.DataObject, hard: bool) -> None:
        record_id = data.draw(st.sampled_from(self.live()))
        if hard:
            self.gone.add(record_id)
        self.step(lambda: self.memory.delete("ns", record_id, hard=hard))

    @precondition(lambda self: self.live())
    @rule(data=st.data())
    def verify(self, data: st.DataObject) -> None:
        record_id = data.draw(st.sampled_from(self.live()))
        self.step(lambda: self.memory.verify("ns", record_id, "reviewer"))

    # -- the check ---------------------------------------------------------------------

    @rule(
        data=st.data(),
        word=st.sampled_from(WORDS),
        ranking=st.sampled_from(["lexical", "semantic", "hybrid"]),
        mode=st.sampled_from(["current", "historical", "as_of", "between"]),
        tag=sometimes(st.sampled_from(TAGS)),
        kind=sometimes(st.sampled_from(["note", "fact"])),
        room=sometimes(st.sampled_from(ROOMS)),
        predicate=sometimes(
            st.tuples(
                st.just("priority"),
                st.sampled_from(["EQ", "GTE", "LT"]),
                st.sampled_from(["1", "5"]),
            )
        ),
        verified=st.booleans(),
        offset=st.integers(0, DAY // 4),
    )
    def search_in_the_past(self, data, word, ranking, mode, tag, kind, room, predicate,
                           verified, offset) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
        index = data.draw(st.integers(0, len(self.snapshots) - 1), label="snapshot")
        taken, snapshot = self.snapshots[index]
        known_at = taken + offset  # still before the next step (a half day later)
        options: dict = {"top_k": 500, "candidate_k": 500, "ranking": ranking,
                         "known_at": format_instant(known_at)}  # fmt: skip
        window: tuple[int, int] | None = (known_at, known_at + 1)
        day = st.integers(-6, 62)
        if mode == "historical":
            options["include_historical"] = True
            window = None
        elif mode == "as_of":
            at = BASE + data.draw(day, label="as_of") * DAY
            options["as_of"] = format_instant(at)
            window = (at, at + 1)
        elif mode == "between":
            start = data.draw(day, label="from")
            end = data.draw(st.integers(start + 1, start + 20), label="until")
            options["between"] = {"from": format_instant(BASE + start * DAY),
                                  "until": format_instant(BASE + end * DAY)}  # fmt: skip
            window = (BASE + start * DAY, BASE + end * DAY)
        if tag:
            options["tags"] = [tag]
        if kind:
            options["kind"] = kind
        if room:
            options["filter"] = {"room": room}
        if predicate:
            options["predicates"] = [{"key": predicate[0], "op": predicate[1],
                                      "values": [predicate[2]]}]  # fmt: skip
        if verified:
            options["min_trust"] = "verified"

        def in_scope(r: Record) -> bool:
            return (
                overlaps(r, window)
                and (not tag or tag in r.tags)
                and (not kind or r.kind == kind)
                and (not room or r.metadata.get("room") == room)
                and (
                    not predicate
                    or predicate_holds(r.metadata, predicate[0], predicate[1], [predicate[2]])
                )
                and (not verified or r.trust == "verified")
            )

        scope = {i: r for i, r in snapshot.items() if i not in self.gone and in_scope(r)}
        if ranking == "lexical":
            scope = {i: r for i, r in scope.items() if word in r.content.split()}
        result = self.memory.search("ns", word, **options)
        got = {hit.record.id: hit for hit in result.hits}
        assert len(got) == len(result.hits)
        assert set(got) == set(scope), (options, sorted(scope), sorted(got))
        assert result.unembedded == 0
        for record_id, hit in got.items():
            assert plain(hit.record) == plain(scope[record_id]), record_id
        lexical = self.bm25(word, scope) if ranking != "semantic" else {}
        semantic = self.similarities(word, scope) if ranking != "lexical" else {}
        if ranking == "hybrid":
            # each hit's lane scores are the oracle's; the order is their fusion (RRF,
            # ties by closeness to each lane's best, then id), the lanes ranked as the
            # product ranks one lane: by score, ties by id
            for record_id, hit in got.items():
                assert ("lexical" in hit.signals) == (record_id in lexical), record_id
                if record_id in lexical:
                    assert hit.signals["lexical"]["score"] == pytest.approx(
                        lexical[record_id], abs=1e-6
                    ), record_id
                assert hit.signals["semantic"]["similarity"] == pytest.approx(
                    semantic[record_id], abs=1e-5
                ), record_id
            lanes = [
                {i: float(h.signals[name][key]) for i, h in got.items() if name in h.signals}
                for name, key in (("lexical", "score"), ("semantic", "similarity"))
            ]
            ranked = [sorted(lane, key=lambda i, lane=lane: (-lane[i], i)) for lane in lanes]
            for name, ids in zip(("lexical", "semantic"), ranked, strict=True):
                assert [got[i].signals[name]["rank"] for i in ids] == list(
                    range(1, len(ids) + 1)
                ), name
            fused = reciprocal_rank_fusion(
                ranked,
                scores=[[lane[i] for i in ids] for lane, ids in zip(lanes, ranked, strict=True)],
            )
            assert [hit.record.id for hit in result.hits] == [i for i, _ in fused]
            assert [hit.score for hit in result.hits] == pytest.approx([f for _, f in fused])
        else:
            order = [(-hit.score, hit.record.id) for hit in result.hits]
            assert order == sorted(order), "one lane's hits are ordered by score, ties by id"
            expected = lexical or semantic
            for record_id, hit in got.items():
                assert hit.score == pytest.approx(
                    expected[record_id], abs=1e-6 if lexical else 1e-5
                ), record_id

    def bm25(self, word: str, scope: dict[str, Record]) -> dict[str, float]:
        """BM25 of the scope's records that hold ``word``, with the namespace's
        statistics of now (every record row, tombstones too), a word no current record
        holds counted as held by one."""
        now = self.snapshots[-1][1].values()
        if not scope:
            return {}
        mean = sum(len(r.content.split()) for r in now) / len(now)
        df = max(1, sum(word in r.content.split() for r in now))
        idf = math.log(1 + (len(now) - df + 0.5) / (df + 0.5))
        scores = {}
        for record_id, record in scope.items():
            words = record.content.split()
            tf = words.count(word)
            if tf:
                scores[record_id] = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / mean))
        return scores

    def similarities(self, word: str, scope: dict[str, Record]) -> dict[str, float]:
        """Each version ranked by its own vector: the hash embedder's, recomputed."""
        query = self.embedder.embed_query(word)
        return {
            record_id: float(np.dot(query, self.embedder.embed_documents([r.content])[0]))
            for record_id, r in scope.items()
        }

    @rule(data=st.data(), offset=st.integers(0, DAY // 4))
    def get_in_the_past(self, data: st.DataObject, offset: int) -> None:
        taken, snapshot = self.snapshots[data.draw(st.integers(0, len(self.snapshots) - 1))]
        for record_id in self.live():
            if record_id in snapshot:
                known = self.memory.get("ns", record_id, known_at=format_instant(taken + offset))
                assert plain(known) == plain(snapshot[record_id])
            else:
                with pytest.raises(erstwhile.ErstwhileError) as error:
                    self.memory.get("ns", record_id, known_at=format_instant(taken + offset))
                assert error.value.code == "erstwhile.not_found"

    @precondition(lambda self: self.snapshots and self.snapshots[-1][1])
    @rule(data=st.data(), offset=st.integers(0, DAY // 4))
    def history_of_every_version(self, data: st.DataObject, offset: int) -> None:
        """``history(versions=True)`` lists, for each record of the chain, every
        version the snapshots saw, in order, each known from its ``updated_at`` until
        the next one's (None while current); under ``known_at`` those recorded by then.
        The default history's entries are the current versions, with no end."""
        record_id = data.draw(st.sampled_from(sorted(self.snapshots[-1][1])))  # recorded
        chain = self.memory.history("ns", record_id)
        assert all(r.known_until is None for r in chain)
        every = self.memory.history("ns", record_id, versions=True)
        assert {r.id for r in every} == {r.id for r in chain}
        stamps = [(r.updated_at, r.version) for r in every]
        assert [s[0] for s in stamps] == sorted(s[0] for s in stamps), "record-time order"
        taken = self.snapshots[data.draw(st.integers(0, len(self.snapshots) - 1))][0]
        known_at = taken + offset
        if all(to_us(r.updated_at) > known_at for r in every if r.id == record_id and r.updated_at):
            with pytest.raises(erstwhile.ErstwhileError) as error:  # not recorded yet
                self.memory.history("ns", record_id, format_instant(known_at), versions=True)
            assert error.value.code == "erstwhile.not_found"
            then: list[Record] = []
        else:
            then = self.memory.history("ns", record_id, format_instant(known_at), versions=True)
            linked = {r.id for r in self.memory.history("ns", record_id, format_instant(known_at))}
            assert {r.id for r in then} == linked  # the chain as its links were known then
        for chained in chain:
            seen: list[Record] = []  # the distinct versions the snapshots held, in order
            for _, snapshot in self.snapshots:
                found = snapshot.get(chained.id)
                if found is not None and (not seen or plain(seen[-1]) != plain(found)):
                    seen.append(found)
            listed = [r for r in every if r.id == chained.id]
            assert [plain(r) for r in listed] == [plain(r) for r in seen], chained.id
            ends = [r.updated_at for r in listed[1:]] + [None]
            assert [r.known_until for r in listed] == ends, chained.id
            if any(r.id == chained.id for r in then):
                recorded = [r for r in listed if r.updated_at and to_us(r.updated_at) <= known_at]
                assert [r for r in then if r.id == chained.id] == recorded, chained.id


class PostgresKnownAtMachine(KnownAtMachine):
    backend = "postgres"


class CitusKnownAtMachine(KnownAtMachine):
    backend = "citus"  # the store distributed by namespace (tests/support/pg.py)


for machine, examples in (
    (KnownAtMachine, 40), (PostgresKnownAtMachine, 15), (CitusKnownAtMachine, 10),
):  # fmt: skip
    machine.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
test_known_at_oracle_sqlite = KnownAtMachine.TestCase
test_known_at_oracle_postgres = pytest.mark.usefixtures("postgres_server")(
    PostgresKnownAtMachine.TestCase
)
test_known_at_oracle_citus = pytest.mark.usefixtures("citus_server")(CitusKnownAtMachine.TestCase)

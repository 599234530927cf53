"""Writers of one PostgreSQL namespace run side by side (no lock of the namespace held
for a whole write: its language is shared, its counts are a short final update), and
the BM25 statistics they leave are exact: the counts, N, the total length and every
score equal those of a fresh store written in one go with the same final contents, and
of the brute-force BM25 (``tests/store/test_bm25.py``'s oracle). Real writer threads on
a real PostgreSQL, each on a pooled connection of its own."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from tests.store.test_bm25 import oracle
from tests.support import pg

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.domain.time import now_us
from erstwhile.store.sql.store import SqlStore
from erstwhile.store.sql.writes import Writes

NS = "shared"
WORDS = ["river", "stone", "mill", "quiet", "water", "lamp", "road", "house", "tree", "cloud"]
#: How long a test waits for something that should happen promptly (a bound on a hang,
#: never a measure of speed).
PATIENCE = 60.0


@pytest.fixture
def target(postgres_server: pg.PgServer) -> Iterator[str]:
    url = postgres_server.new_target()
    yield url
    postgres_server.drop_target(url)


def _store(m: erstwhile.Memory) -> SqlStore:
    store = m.service.store
    assert isinstance(store, SqlStore)
    return store


def _counts(url: str, namespace: str) -> tuple[tuple[int, int], dict[str, int]]:
    """The namespace's (documents, length) and each term's df, as stored."""
    with psycopg.connect(url) as conn:
        stats = conn.execute(
            "SELECT documents, length FROM lexical_stats WHERE namespace = %s", (namespace,)
        ).fetchone()
        terms = conn.execute(
            "SELECT term, df FROM lexical_terms WHERE namespace = %s", (namespace,)
        ).fetchall()
    assert stats is not None
    return (int(stats[0]), int(stats[1])), dict(terms)


def _ranked(m: erstwhile.Memory, query: str) -> list[tuple[str, float]]:
    found = m.search(NS, query, ranking="lexical", top_k=500)
    return [(hit.record.id, hit.score) for hit in found.hits]


def _held_open(
    m: erstwhile.Memory, records: list[dict[str, str]]
) -> tuple[threading.Thread, threading.Event, threading.Event, list[BaseException]]:
    """A write of ``records`` that stays open once they are written (until ``release``
    is set), as a long batch's transaction does: (thread, written, release, errors)."""
    store = _store(m)
    written, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def work(tx: Any) -> None:
        writes = Writes(store.dialect, tx, NS, now=now_us(), actor="test")
        writes.upsert([Record(id=r["id"], content=r["content"]) for r in records], None)
        tx.execute("SELECT 1")  # the held-back rows sent: the write is under way
        written.set()
        assert release.wait(PATIENCE)
        writes.flush()

    def run() -> None:
        try:
            store.db.write(work)
        except BaseException as error:  # asserted by the test
            errors.append(error)
            written.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert written.wait(PATIENCE)
    return thread, written, release, errors


def _in_background(call: Callable[[], Any]) -> tuple[threading.Thread, threading.Event, list[Any]]:
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # asserted by the test
            outcome.append(error)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done, outcome


def _waiting_on_a_lock(url: str) -> bool:
    """Whether a session of the test database waits on a lock (the database is this
    test run's own: any such session is this test's)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def test_a_write_goes_through_while_another_is_open_and_a_language_change_waits(
    target: str,
) -> None:
    """While one write of the namespace is open (its records written, not committed),
    another writes and commits; a change of the namespace's language waits for the
    open one, and once all are done every record is indexed in the new language."""
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        m.upsert(NS, [{"id": "first", "content": "the river runs by the mill"}])
        holder, _, release, errors = _held_open(
            m, [{"id": "held", "content": "running water turns the mill"}]
        )
        try:
            writer, wrote, _ = _in_background(
                lambda: m.upsert(NS, [{"id": "beside", "content": "stones in running water"}])
            )
            assert wrote.wait(PATIENCE), "a write waited for another write's whole transaction"
            writer.join()
            assert m.get(NS, "beside").content == "stones in running water"
            changer, changed, outcome = _in_background(
                lambda: m.service.store.set_text_search(NS, "simple")
            )
            deadline = time.monotonic() + PATIENCE
            while not _waiting_on_a_lock(target) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not changed.is_set(), "the language changed under an open write"
        finally:
            release.set()
            holder.join()
        assert errors == []
        assert changed.wait(PATIENCE)
        changer.join()
        assert outcome == [True]
        # "simple" neither stems nor drops words: "running" is no longer "run"
        assert sorted(m.search(NS, "running", ranking="lexical").ids()) == ["beside", "held"]
        assert m.search(NS, "runs", ranking="lexical").ids() == ["first"]
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]


def _script(seed: int, writer: int, rounds: int) -> list[list[tuple[str, str | None]]]:
    """One writer's batches: (id, content) creates or rewrites, (id, None) hard deletes,
    of its own records. Round r's records may hold ``novelr``, new to every writer at
    the same moment, and those it creates hold ``onlyr``, which its rewrites and hard
    deletes take away again (counts going down, some to zero, while others add)."""
    rng = random.Random(seed * 1000 + writer)
    own: list[str] = []
    batches = []
    for r in range(rounds):
        earlier = list(own)  # written by its earlier batches
        rng.shuffle(earlier)
        batch: list[tuple[str, str | None]] = []
        for n in range(rng.randint(1, 12)):
            words = rng.choices(WORDS, k=rng.randint(1, 6)) + [f"novel{r}"] * rng.randint(0, 2)
            if earlier and rng.random() < 0.3:  # a rewrite of one of its records
                batch.append((earlier.pop(), " ".join(words)))
            else:
                rid = f"w{writer}-{r}-{n}"
                own.append(rid)
                batch.append((rid, " ".join([*words, f"only{r}"])))
        if earlier and rng.random() < 0.5:
            gone = earlier.pop()
            own.remove(gone)
            batch.append((gone, None))
        batches.append(batch)
    return batches


def _final(scripts: list[list[list[tuple[str, str | None]]]]) -> dict[str, str]:
    contents: dict[str, str] = {}
    for script in scripts:  # each writer's own records: the order among writers is moot
        for batch in script:
            for rid, content in batch:
                if content is None:
                    contents.pop(rid, None)
                else:
                    contents[rid] = content
    return contents


def _run(m: erstwhile.Memory, script: list[list[tuple[str, str | None]]], go: Any) -> None:
    go.wait()
    for batch in script:
        writes = [{"id": rid, "content": content} for rid, content in batch if content]
        if writes:
            m.upsert(NS, writes)
        for rid, content in batch:
            if content is None:
                m.delete(NS, rid, hard=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_writers_leave_exact_statistics_and_scores(
    target: str, postgres_server: pg.PgServer, seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Four writer threads, each on its own connection, write one namespace at once
    (creates, rewrites, hard deletes; the same new terms at the same moment): the
    statistics, each term's count and every score are those of a fresh store written in
    one go with the final contents, and those of the brute-force BM25; no write lost a
    deadlock."""
    writers, rounds = 4, 6
    scripts = [_script(seed, w, rounds) for w in range(writers)]
    caplog.set_level(logging.DEBUG, logger="erstwhile.store.postgres")
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        m.upsert(NS, [{"id": "seed", "content": "river stone"}])  # the namespace exists
        go = threading.Barrier(writers)
        failures: list[BaseException] = []

        def run(script: list[list[tuple[str, str | None]]]) -> None:
            try:
                _run(m, script, go)
            except BaseException as error:  # asserted below
                failures.append(error)

        threads = [threading.Thread(target=run, args=(script,)) for script in scripts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE * 5)
            assert not thread.is_alive()
        assert failures == []
        contents = {"seed": "river stone", **_final(scripts)}
        queries = [*WORDS, *(f"novel{r}" for r in range(rounds)), "river novel0 lamp", "only2"]
        concurrent = {q: _ranked(m, q) for q in queries}
        stored = _counts(target, NS)
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]
    assert not [r for r in caplog.records if "retried" in r.getMessage()], "a write was retried"
    fresh = postgres_server.new_target()
    try:
        with erstwhile.open(fresh, embedder="none", background_jobs=False) as one:
            one.upsert(NS, [{"id": rid, "content": c} for rid, c in sorted(contents.items())])
            assert _counts(fresh, NS) == stored
            for query in queries:
                assert concurrent[query] == _ranked(one, query), query  # to the last bit
                expected = oracle(contents, query, set(contents))
                assert {rid for rid, _ in concurrent[query]} == set(expected)
                for rid, score in concurrent[query]:
                    assert score == pytest.approx(expected[rid], abs=1e-6)
    finally:
        postgres_server.drop_target(fresh)

"""A new record that reads nothing of the store (nothing stored under its id, no key,
supersedes nothing) has its rows made straight from it (``Writes._create``); every
other one takes the general path (``Writes._upsert_one``). The store either way is the
same: on both backends, two stores on one clock, one written with the straight path
and one without, hold the same rows in every table after the same batches (unicode,
tags, metadata of every type, validity, keys, supersession, revisions, vectors as
lists or arrays or none), and refuse the same batches with the same error."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.support import pg
from tests.support.raw import TABLES, backend_of, dump_tables

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.domain.time import to_us
from erstwhile.store.sql import writes

START = datetime(2024, 1, 1, tzinfo=UTC)
DIMENSIONS = 256  # the hash embedder's
PAST = ["record_past", "past_tags", "past_meta", "past_vectors"]
_names = itertools.count()


class Pair:
    """Two stores of one backend: ``straight`` as shipped, ``general`` written with
    every record through the general path; made again after a failed example (whose
    stores no longer agree), so that each example starts from agreeing stores."""

    def __init__(self, backend: str, request: pytest.FixtureRequest, where: Any) -> None:
        self.backend, self.request, self.where = backend, request, where
        self.clock = itertools.count(to_us(START + timedelta(days=3000)), 1_000_000)
        self.targets: list[str] = []
        self.opened: list[erstwhile.Memory] = []
        self.open()

    def open(self) -> None:
        if self.backend == "sqlite":
            n = next(_names)
            self.targets = [str(self.where / f"straight{n}.db"), str(self.where / f"general{n}.db")]
        else:
            server: pg.PgServer = self.request.getfixturevalue("postgres_server")
            self.targets = [server.new_target(), server.new_target()]
        self.opened = [erstwhile.open(t, embedder="hash", background_jobs=False)
                       for t in self.targets]  # fmt: skip

    def close(self) -> None:
        for m in self.opened:
            m.close()
        if self.backend == "postgres":
            for t in self.targets:
                self.request.getfixturevalue("postgres_server").drop_target(t)

    def reset(self) -> None:
        self.close()
        self.open()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    opened = Pair(request.param, request, tmp_path_factory.mktemp("plain"))
    yield opened
    opened.close()


_TEXT = st.text(alphabet="aZé ü😀\x00_-.:1\t", min_size=0, max_size=8)
_CONTENT = st.text(alphabet="aZé ü😀\x00_-.:1\t", min_size=1, max_size=12)
# mostly valid validity (the clock's "now" is in 2032), now and then one refused
_FROM = st.sampled_from([
    "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123456Z", "2024-05-02",
    "2024-05-01T14:00:00+02:00", "0999-01-01T00:00:00Z", "2025-01-01T00:00:00.000001Z",
    "2024-02-30T00:00:00Z",
])  # fmt: skip
_TO = st.sampled_from(
    ["2040-01-01T00:00:00Z", "2041-06-01T00:00:00.5Z", "2040-01-01", "2024-05-01T00:00:00Z"]
)
_METADATA_VALUE = st.one_of(
    _TEXT, st.sampled_from(["1", "2.5", "-3e2", "x", " 1", "1_000", "nan"]), st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=32), st.booleans(),
)  # fmt: skip
#: (field, values, percent of records that have it)
_OPTIONAL: list[tuple[str, Any, int]] = [
    ("metadata", st.dictionaries(st.sampled_from(["room", "n", "é", "a b"]), _METADATA_VALUE,
                                 max_size=3), 60),
    ("tags", st.lists(st.sampled_from(["a", "b", "é", " c ", "a"]), max_size=3), 40),
    ("kind", st.sampled_from(["note", " Fact ", "décision"]), 20),
    ("source", _TEXT, 20),
    ("valid_from", _FROM, 60),
    ("valid_to", _TO, 30),
    ("key", st.sampled_from(["k1", "k2"]), 10),
    ("supersedes", st.lists(st.integers(0, 9), min_size=1, max_size=2), 10),
    ("if_version", st.integers(0, 2), 10),
    ("payload", st.just(b"\x00p"), 5),
    ("deleted_at", st.just("2024-06-01T00:00:00Z"), 5),
]  # fmt: skip


@st.composite
def _record(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {"id": draw(st.integers(0, 9)), "content": draw(_CONTENT)}
    for name, values, percent in _OPTIONAL:
        if draw(st.integers(0, 99)) < percent:
            record[name] = draw(values)
    return record


# the batch's vectors: none, each a list, each an array, or only some records' (lists)
_VECTORS = st.sampled_from(["none", "lists", "arrays", "some"])


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "0")
    if isinstance(value, dict):
        return {key: _without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    return value


def _batch(given: list[dict[str, Any]], vectors: str, as_records: bool, backend: str) -> list[Any]:
    out: list[Any] = []
    seen: set[str] = set()
    for n, fields in enumerate(given):
        record = {**fields, "id": f"r{fields['id']}"}
        if backend == "postgres":  # its text holds no NUL (the driver refuses it, either way)
            record = _without_nul(record)
        if record["id"] in seen:
            continue
        seen.add(record["id"])
        if "supersedes" in record:
            record["supersedes"] = [f"r{old}" for old in record["supersedes"]]
        rng = np.random.default_rng(n)
        row = rng.standard_normal(DIMENSIONS).astype(np.float32)
        if vectors == "lists" or (vectors == "some" and n % 2 == 0):
            record["vector"] = row.tolist()
        elif vectors == "arrays":
            record["vector"] = row
        out.append(record)
    if as_records:  # the service's callers that hand it records (REST, MCP, gRPC, jobs)
        try:
            return [Record.model_validate(r) for r in out]
        except ValueError:
            return out
    return out


def _write(m: erstwhile.Memory, namespace: str, batch: list[Any]) -> Any:
    try:
        result = m.upsert(namespace, batch)
        return (result.ids, result.versions, result.warnings)
    except erstwhile.ErstwhileError as error:
        return (type(error), error.message)


def _tables(target: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables a write changes; on PostgreSQL without the ``xid`` of
    the transaction that wrote it (two stores of one server never share one)."""
    names = [*TABLES[backend_of(target)], *PAST]
    if backend_of(target) == "sqlite":
        return dump_tables(target, [*names, "lexical_tail"])
    found = {}
    with psycopg.connect(target) as conn:
        for name in names:
            cursor = conn.execute(f"SELECT * FROM {name} LIMIT 0".encode())
            columns = [c.name for c in cursor.description or [] if c.name != "xid"]
            rows = conn.execute(f"SELECT {', '.join(columns)} FROM {name}".encode()).fetchall()
            found[name] = sorted(rows, key=repr)
    return found


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    batches=st.lists(
        st.tuples(st.lists(_record(), min_size=1, max_size=8), _VECTORS, st.booleans()),
        min_size=1, max_size=3,
    )
)  # fmt: skip
def test_the_straight_path_writes_what_the_general_path_writes(
    pair: Pair, batches: list[tuple[list[dict[str, Any]], str, bool]]
) -> None:
    try:
        _compare(pair, batches)
    except AssertionError:
        pair.reset()
        raise


def _compare(pair: Pair, batches: list[tuple[list[dict[str, Any]], str, bool]]) -> None:
    namespace = f"n{next(_names)}"
    for given_records, vectors, as_records in batches:
        now = next(pair.clock)
        batch = _batch(given_records, vectors, as_records, pair.backend)
        outcomes = []
        for m, straight in zip(pair.opened, (True, False), strict=True):
            m.service.clock = lambda now=now: now
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(writes, "PLAIN_BATCH", straight)
                outcomes.append(_write(m, namespace, batch))
        event(str(outcomes[0][0]) if isinstance(outcomes[0][0], type) else "written")
        assert outcomes[0] == outcomes[1]
    tables = [_tables(target) for target in pair.targets]
    for name in tables[0]:
        assert tables[0][name] == tables[1][name], name
    for record_id in {f"r{i}" for i in range(10)}:
        found = []
        for m in pair.opened:
            try:
                found.append(m.history(namespace, record_id, versions=True))
            except erstwhile.ErstwhileError as error:
                found.append(type(error))
        assert found[0] == found[1]


def test_a_batch_of_new_plain_records_takes_the_straight_path(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common shape (ids, content, metadata, validity, a vector each) is written
    by ``_create`` alone; a record that supersedes another, or that exists, is not."""
    taken: list[str] = []
    create, general = writes.Writes._create, writes.Writes._upsert_one

    def counted_create(self: writes.Writes, record: Record, *args: Any) -> Any:
        done = create(self, record, *args)
        if done is not None:
            taken.append(f"straight {record.id}")
        return done

    def counted_general(self: writes.Writes, index: int, record: Record, *args: Any) -> Any:
        taken.append(f"general {record.id}")
        return general(self, index, record, *args)

    monkeypatch.setattr(writes.Writes, "_create", counted_create)
    monkeypatch.setattr(writes.Writes, "_upsert_one", counted_general)
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as m:
        vector = [1.0] * DIMENSIONS
        m.upsert("ns", [
            {"id": "a", "content": "x", "metadata": {"room": "r"}, "vector": vector,
             "valid_from": "2024-01-01T00:00:00Z", "valid_to": "2024-02-01T00:00:00.5Z"},
            {"id": "b", "content": "y", "vector": vector, "tags": ["t"]},
            {"id": "c", "content": "z", "vector": vector, "valid_from": "2024-03-01",
             "supersedes": ["a"]},
        ])  # fmt: skip
        m.upsert("ns", [{"id": "b", "content": "y2"}, {"id": "d", "content": "w"}])
        assert taken == ["straight a", "straight b", "general c", "general b", "straight d"]
        assert m.get("ns", "a").superseded_by == "c"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": "b", "content": "y", "valid_to": "2023-01-01"},
         "records[1].valid_to must be later than valid_from"),
        ({"id": "b", "content": "y", "if_version": 2},
         "records[1].if_version is 2 but 'b' does not exist"),
    ],
)  # fmt: skip
def test_a_refused_record_is_named_as_by_the_general_path(
    tmp_path: Any, bad: dict[str, Any], message: str
) -> None:
    """The straight path leaves what the revision refuses to it, which names the record
    and writes nothing of the batch."""
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as m:
        m.service.clock = lambda: to_us(START)
        with pytest.raises(erstwhile.ErstwhileError) as error:
            m.upsert("ns", [{"id": "a", "content": "x"}, bad])
        assert message in error.value.message
        with pytest.raises(erstwhile.NotFound):
            m.get("ns", "a")

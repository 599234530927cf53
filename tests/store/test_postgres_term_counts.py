"""PostgreSQL's term counts (``lexical_terms``, updated in place then inserted:
``PostgresDialect.add_term_counts``, pages half free since m012) stay each term's
number of current records through creations, content rewrites and hard deletes, in
batches small (pipelined) and large (COPY), against counts made from the records'
contents; and the binary array parameters (:mod:`erstwhile.store.postgres.arrays`)
reach the server as the lists they were made of (a real PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from itertools import count

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import pg

import erstwhile
from erstwhile.domain.words import DEFAULT_LANGUAGE, term_counts
from erstwhile.store.postgres import arrays

_NAMESPACES = count()
WORDS = ["river", "stone", "mill", "quiet", "water", "old", "house", "tree", "road", "lamp"]


@pytest.fixture(scope="module")
def target(postgres_server: pg.PgServer) -> Iterator[str]:
    url = postgres_server.new_target()
    yield url
    postgres_server.drop_target(url)


def _stored_counts(url: str, namespace: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT term, df FROM lexical_terms WHERE namespace = %s", (namespace,)
        ).fetchall()
    return dict(rows)


# one batch: (id number, content words, or None for a hard delete)
_BATCH = st.lists(
    st.tuples(st.integers(0, 120), st.none() | st.lists(st.sampled_from(WORDS), max_size=6)),
    min_size=1, max_size=100, unique_by=lambda op: op[0],
)  # fmt: skip


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(_BATCH, min_size=1, max_size=4))
def test_term_counts_are_the_current_records_with_each_term(
    target: str, batches: list[list[tuple[int, list[str] | None]]]
) -> None:
    namespace = f"n{next(_NAMESPACES)}"  # each example a namespace of its own
    current: dict[str, str] = {}
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        for batch in batches:
            writes = [{"id": f"r{n}", "content": " ".join(words) or "lamp"}
                      for n, words in batch if words is not None]  # fmt: skip
            if writes:
                m.upsert(namespace, writes)
                current.update({w["id"]: w["content"] for w in writes})
            for n, words in batch:
                if words is None and f"r{n}" in current:
                    m.delete(namespace, f"r{n}", hard=True)
                    del current[f"r{n}"]
            expected: Counter[str] = Counter()
            for content in current.values():
                expected.update(term_counts(content, DEFAULT_LANGUAGE)[0].keys())
            assert _stored_counts(target, namespace) == dict(expected)
        report = m.service.store.integrity()
        assert all(f.ok for f in report), [f.problems for f in report]


def test_term_counts_keep_half_of_each_page_free(target: str) -> None:
    with erstwhile.open(target, embedder="none", background_jobs=False):
        pass
    with psycopg.connect(target) as conn:
        (options,) = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = to_regclass('lexical_terms')"
        ).fetchone()
    assert options == ["fillfactor=50"]


_TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=300)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(_TEXT, max_size=40), ints=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40)
)
def test_binary_arrays_arrive_as_their_lists(
    target: str, texts: list[str], ints: list[int]
) -> None:
    with psycopg.connect(target) as conn:
        arrays.register(conn)
        got = conn.execute(
            "SELECT %s::text[], %s::bigint[], %s::text[] = %s::text[]",
            (arrays.text_array(texts), arrays.bigint_array(ints), arrays.array(texts), texts),
        ).fetchone()
    assert got is not None
    assert got[0] == texts and got[1] == ints and got[2] in (True, None)


def test_lists_of_other_values_are_left_to_the_driver() -> None:
    assert isinstance(arrays.array(["a", "b"]), arrays.TextArray)
    assert isinstance(arrays.array([1, 2]), arrays.BigintArray)
    assert arrays.array([True, False]) == [True, False]
    assert arrays.array([1, "a"]) == [1, "a"]
    assert arrays.array([2**64]) == [2**64]

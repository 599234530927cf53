"""SQLite's lexical lane ranks over the scope copy in numpy (``lexical._ranked_in_copy``)
once the copy is built, and in SQL before it and where the copy cannot decide: both
give the same hits with the same scores, to the last bit, in the same order (ties by
id), over random corpora, scopes and writes made through another handle."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.store.sql import lexical

WORDS = ("river", "stone", "cloud", "lamp", "river river", "stone cloud")
DAYS = [f"2024-01-{d:02d}T00:00:00Z" for d in range(1, 29)]

_RECORD = st.fixed_dictionaries(
    {
        "content": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        "tags": st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True),
        "room": st.sampled_from(["r0", "r1"]),
        "kind": st.sampled_from(["note", "fact"]),
        "start": st.integers(0, 13),
        "length": st.none() | st.integers(1, 14),
        "deleted": st.booleans(),
    }
)
_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "include_historical": st.just(True),
        "tags": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True),
        "filter": st.sampled_from([{"room": "r0"}, {"room": "r1"}]),
        "kind": st.sampled_from(["note", "fact"]),
        "as_of": st.sampled_from(DAYS),
        "key": st.just("k"),  # a scope the copy does not decide: SQL on both handles
    },
)


_SEARCH = st.tuples(st.sampled_from((*WORDS, "lamp river", "none")), st.integers(1, 8), _OPTIONS)


def _records(drawn: list[dict[str, Any]], start: int = 0) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(drawn):
        record: dict[str, Any] = {
            "id": f"m{start + i:03d}", "content": r["content"], "tags": r["tags"],
            "metadata": {"room": r["room"]}, "kind": r["kind"], "valid_from": DAYS[r["start"]],
        }  # fmt: skip
        if r["length"] is not None:
            record["valid_to"] = DAYS[r["start"] + r["length"]]
        out.append(record)
    return out


def _ranked(memory: erstwhile.Memory, query: str, k: int, options: dict[str, Any]) -> list[Any]:
    if "as_of" in options and "include_historical" in options:
        options = {key: v for key, v in options.items() if key != "include_historical"}
    found = memory.search("ns", query, ranking="lexical", top_k=k, **options)
    return [(hit.record.id, hit.score, hit.record.to_json()) for hit in found.hits]


def _handles(path: str) -> tuple[erstwhile.Memory, erstwhile.Memory]:
    copied = erstwhile.open(path, embedder="hash", background_jobs=False)
    copied.service.store.dialect._scopes.warm_after = 1  # type: ignore[attr-defined]
    in_sql = erstwhile.open(path, embedder="hash", background_jobs=False)
    in_sql.service.store.dialect._scopes.warm_after = 10**9  # type: ignore[attr-defined]
    return copied, in_sql


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=st.lists(_RECORD, min_size=1, max_size=40),
    later=st.lists(_RECORD, max_size=10),
    searches=st.lists(_SEARCH, min_size=1, max_size=6),
)
def test_the_copy_ranks_as_sql_does(
    corpus: list[dict[str, Any]],
    later: list[dict[str, Any]],
    searches: list[tuple[str, int, dict[str, Any]]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "store.db")
        copied, in_sql = _handles(path)
        try:
            in_sql.upsert("ns", _records(corpus))
            in_sql.upsert("other", [{"id": "o", "content": "river stone lamp"}])
            for i, r in enumerate(corpus):
                if r["deleted"]:
                    in_sql.delete("ns", f"m{i:03d}")
            for round_ in range(2):
                for query, k, options in searches:
                    assert _ranked(copied, query, k, options) == _ranked(
                        in_sql, query, k, options
                    ), (round_, query, k, options)
                # written through the other handle: the copy follows it
                if later:
                    in_sql.upsert("ns", _records(later, start=len(corpus)))
                if corpus:
                    in_sql.upsert("ns", {"id": "m000", "content": "lamp lamp stone"})
        finally:
            copied.close()
            in_sql.close()


def test_the_copy_path_is_taken_and_agrees_on_ties(tmp_path: Path, monkeypatch: Any) -> None:
    """Many records of one score: the best ``k`` by id, on both paths, and the copy's
    path is the one that answered."""
    path = str(tmp_path / "store.db")
    copied, in_sql = _handles(path)
    calls: list[int] = []
    ranked_in_copy = lexical._ranked_in_copy

    def counting(*args: Any) -> Any:
        calls.append(1)
        return ranked_in_copy(*args)

    monkeypatch.setattr(lexical, "_ranked_in_copy", counting)
    try:
        in_sql.upsert("ns", [{"id": f"t{i:02d}", "content": "river stone"} for i in range(30)])
        in_sql.upsert("ns", [{"id": "z", "content": "river river stone"}])
        for k in (1, 3, 10, 31):
            got = _ranked(copied, "river", k, {})
            assert got == _ranked(in_sql, "river", k, {})
            assert [hit[0] for hit in got][:3] == ["z", "t00", "t01"][: min(k, 3)]
        assert calls  # the copy handle ranked in numpy
    finally:
        copied.close()
        in_sql.close()

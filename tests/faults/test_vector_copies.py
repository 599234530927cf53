"""The saved vector copies (``<db>.vectors/``, erstwhile.store.sqlite.vector_file) are
caches with a commit point in the database: a hard delete (or a hard ``expire``)
leaves no byte of the record's vectors in any file, and no torn, flipped, truncated,
older, half-written or racing copy ever changes a search's answer. Every answer is
compared with a brute-force cosine over the vectors read from the database file.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.faults.figures import FIGURES

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sqlite import vector_file

WORKER = Path(__file__).with_name("copy_worker.py")
DIMENSIONS = 32
QUERIES = 30


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def open_store(path: Path, dimensions: int = DIMENSIONS) -> erstwhile.Memory:
    return erstwhile.open(path, embedder=HashEmbedder(dimensions), background_jobs=False)


def cache_of(memory: erstwhile.Memory) -> Any:
    return memory.service.store.dialect._vectors  # type: ignore[attr-defined]


def fill(memory: erstwhile.Memory, vectors: np.ndarray, prefix: str = "v") -> None:
    for start in range(0, vectors.shape[0], 2000):
        memory.upsert("ns", [
            {"id": f"{prefix}{i}", "content": f"record {prefix}{i}", "vector": vectors[i].tolist()}
            for i in range(start, min(vectors.shape[0], start + 2000))
        ])  # fmt: skip


def answers(memory: erstwhile.Memory, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    found = []
    for query in queries:
        hits = memory.search("ns", query_vector=query.tolist(), top_k=10,
                             include_historical=True).hits  # fmt: skip
        found.append([(h.record.id, round(h.score, 5)) for h in hits])
    return found


def oracle(path: Path, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    """The best 10 of each query by cosine over the vectors the database file holds."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT r.id, v.vector FROM records r JOIN vectors v ON v.record = r.rowid"
            " WHERE r.namespace = 'ns' AND v.dimensions > 0"
        ).fetchall()
    finally:
        conn.close()
    ids = [row[0] for row in rows]
    matrix = unit(np.stack([np.frombuffer(row[1], dtype="<f4") for row in rows]))
    found = []
    for query in unit(queries):
        scores = matrix @ query
        best = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:10]
        found.append([(ids[i], round(float(scores[i]), 5)) for i in best])
    return found


def same(got: list[list[tuple[str, float]]], want: list[list[tuple[str, float]]]) -> int:
    """How many answers differ (ids in order; scores within 1e-4)."""
    differ = 0
    for a, b in zip(got, want, strict=True):
        if [i for i, _ in a] != [i for i, _ in b] or any(
            abs(x - y) > 1e-4 for (_, x), (_, y) in zip(a, b, strict=True)
        ):
            differ += 1
    return differ


def files_of(path: Path) -> list[Path]:
    """Every file under the database's name: the file, its WAL, the copies' directory."""
    found = []
    for entry in sorted(path.parent.glob(path.name + "*")):
        found += sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry]
    return found


def traces(path: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for file in files_of(path):
        try:
            data = file.read_bytes()
        except FileNotFoundError:  # removed since it was listed
            continue
        hits = [name for name, needle in needles.items() if needle in data]
        if hits:
            found[file.name] = hits
    return found


def needles_of(name: str, vector: np.ndarray) -> dict[str, bytes]:
    """The vector's bytes whole, and each 16-byte piece of them."""
    data = vector.astype("<f4").tobytes()
    pieces = {f"{name}[{i}:{i + 16}]": data[i : i + 16] for i in range(0, len(data) - 15, 16)}
    return {name: data, **pieces}


@pytest.mark.parametrize("how", ["delete", "expire"])
def test_a_hard_delete_leaves_no_byte_of_its_vectors_in_any_copy(tmp_path: Path, how: str) -> None:
    """12,000 records (the default save threshold is 10,000): the record's vector, and
    its previous version's, are in the saved matrix before the delete; after it, more
    writes and searches, and a close and reopen, no file holds a byte of either."""
    path = tmp_path / "m.db"
    rng = np.random.default_rng(7)
    dimensions = 64
    vectors = unit(rng.normal(size=(12_000, dimensions)))
    secret_old, secret = unit(rng.normal(size=(2, dimensions)))
    needles = {**needles_of("old", secret_old), **needles_of("current", secret)}
    with open_store(path, dimensions) as m:
        cache_of(m).background = False  # the index is built inside the search
        fill(m, vectors)
        m.upsert("ns", [{"id": "secret", "content": "the secret", "vector": secret_old.tolist(),
                         "metadata": {"kind": "secret"}}])  # fmt: skip
        m.search("ns", query_vector=secret_old.tolist(), top_k=3)  # the first load saves
        cache_of(m).saved()
        m.upsert("ns", [{"id": "secret", "content": "the secret, rewritten",
                         "vector": secret.tolist(), "metadata": {"kind": "secret"}}])  # fmt: skip
        assert m.search("ns", query_vector=secret.tolist(), top_k=1).ids() == ["secret"]
        cache_of(m).saved()
        assert "old" in str(traces(path, needles)), "the scan must see the saved vector"
        if how == "delete":
            m.delete("ns", "secret", hard=True)
        else:
            assert m.expire("ns", filter={"kind": "secret"}, action="hard_delete", max_rows=10) == 1
        assert traces(path, needles) == {}  # before any search or save
        more = unit(rng.normal(size=(4_000, dimensions)))
        fill(m, more, prefix="w")  # a quarter more: the next search saves again
        assert "secret" not in m.search("ns", query_vector=secret.tolist(), top_k=5).ids()
        cache_of(m).saved()
        assert list((tmp_path / "m.db.vectors").glob("*.rows.npy")), "saved again"
        assert traces(path, needles) == {}
    with open_store(path, dimensions) as again:
        assert "secret" not in again.search("ns", query_vector=secret.tolist(), top_k=5).ids()
        assert cache_of(again)._matrices and next(iter(cache_of(again)._matrices.values())).adopted
    found = traces(path, needles)
    FIGURES.add("vector copy scans", 1)
    FIGURES.add("vector copy traces", sum(len(v) for v in found.values()))
    assert found == {}


def test_a_save_that_holds_an_erased_record_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another handle's matrix still holds the record when it is hard-deleted (it has
    not refreshed since): a save of that matrix is void, its files removed, and the
    handle's next refresh drops the record, so its next save holds nothing of it."""
    monkeypatch.setattr(vector_file, "SAVE_MIN", 100)
    path = tmp_path / "m.db"
    rng = np.random.default_rng(3)
    vectors = unit(rng.normal(size=(400, DIMENSIONS)))
    with open_store(path) as writer, open_store(path) as other:
        fill(writer, vectors)
        assert other.search("ns", query_vector=vectors[5].tolist(), top_k=1).ids() == ["v5"]
        cache = cache_of(other)
        cache.saved()
        embedder_id, matrix = next(iter(cache._matrices.items()))
        writer.delete("ns", "v5", hard=True)
        assert traces(path, needles_of("v5", vectors[5])) == {}
        with cache._lock:  # a save of the matrix as it was before the delete
            cache._save(embedder_id, matrix)
        cache.saved()
        assert traces(path, needles_of("v5", vectors[5])) == {}
        assert not list((tmp_path / "m.db.vectors").glob("*.npy"))
        assert "v5" not in other.search("ns", query_vector=vectors[5].tolist(), top_k=3).ids()
        with cache._lock:
            cache._save(embedder_id, matrix)  # refreshed: the record is gone from it
        cache.saved()
        assert list((tmp_path / "m.db.vectors").glob("*.rows.npy"))
        assert traces(path, needles_of("v5", vectors[5])) == {}


def saved_store(path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> np.ndarray:
    """A store of 1,500 vectors whose copy (matrix and lists) is saved; the queries."""
    monkeypatch.setattr(vector_file, "SAVE_MIN", 500)
    rng = np.random.default_rng(seed)
    vectors = unit(rng.normal(size=(1_500, DIMENSIONS)))
    with open_store(path) as m:
        fill(m, vectors)
        cache_of(m).min_rows = 1
        m.service.store.build_vector_index(DIMENSIONS)  # type: ignore[attr-defined]
    return unit(rng.normal(size=(QUERIES, DIMENSIONS)))


def fresh_answers(path: Path, queries: np.ndarray) -> tuple[list[list[tuple[str, float]]], bool]:
    """A fresh handle's answers (exact: the scopes are under the index's bound), and
    whether it adopted the saved copy."""
    with open_store(path) as m:
        got = answers(m, queries)
        adopted = next(iter(cache_of(m)._matrices.values())).adopted
        cache_of(m).min_rows = 1  # then a copy with its lists (saved anew if not adopted)
        m.service.store.build_vector_index(DIMENSIONS)  # type: ignore[attr-defined]
    return got, adopted


def _flip(data: bytearray, rng: random.Random, kind: str) -> bytearray:
    middle = len(data) // 2
    if kind == "flip 4 KiB":
        span = min(4096, len(data) - middle)
        data[middle : middle + span] = bytes(b ^ 0xFF for b in data[middle : middle + span])
    elif kind == "flip a bit":
        spot = rng.randrange(len(data))
        data[spot] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del data[middle:]
    elif kind == "empty":
        data.clear()
    elif kind == "garbage":
        data[:] = rng.randbytes(len(data))
    return data


@pytest.mark.parametrize("kind", ["flip 4 KiB", "flip a bit", "truncate", "empty", "garbage"])
def test_a_damaged_copy_never_changes_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    path = tmp_path / "m.db"
    queries = saved_store(path, monkeypatch, 11)
    want = oracle(path, queries)
    got, adopted = fresh_answers(path, queries)
    assert adopted and same(got, want) == 0
    rng = random.Random(kind)
    for suffix in (".rows.npy", ".rowids.npy", ".ivf.npz"):
        (file,) = (tmp_path / "m.db.vectors").glob("*" + suffix)
        file.write_bytes(bytes(_flip(bytearray(file.read_bytes()), rng, kind)))
        got, adopted = fresh_answers(path, queries)
        FIGURES.add("damaged copies", 1)
        FIGURES.add("answers changed by a damaged copy", same(got, want))
        assert not adopted, file.name
        assert same(got, want) == 0, file.name
        got, adopted = fresh_answers(path, queries)  # the damaged copy was saved anew
        assert adopted and same(got, want) == 0, file.name


def test_an_older_save_put_back_is_not_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy saved before half the vectors were rewritten, put back in place of the
    newer one (under its own names, or under the newer one's): never adopted."""
    path = tmp_path / "m.db"
    queries = saved_store(path, monkeypatch, 12)
    folder = tmp_path / "m.db.vectors"
    older = {f.name: f.read_bytes() for f in folder.iterdir() if f.suffix != ".lock"}
    rng = np.random.default_rng(13)
    with open_store(path) as m:
        rewritten = unit(rng.normal(size=(800, DIMENSIONS)))
        fill(m, rewritten)  # v0..v799 rewritten: the first search saves anew
        m.search("ns", query_vector=queries[0].tolist(), top_k=1)
        cache_of(m).saved()
    newer = sorted(f.name for f in folder.iterdir() if f.suffix != ".lock")
    assert set(newer).isdisjoint(older)
    want = oracle(path, queries)
    for name, data in older.items():  # beside the newer copy, under its own names
        (folder / name).write_bytes(data)
    got, adopted = fresh_answers(path, queries)
    assert same(got, want) == 0 and adopted  # the newer one
    for name in older:
        (folder / name).unlink(missing_ok=True)
    by_suffix = {name.split(".", 2)[2]: data for name, data in older.items()}
    for name in newer:  # in the newer one's place
        (folder / name).write_bytes(by_suffix[name.split(".", 2)[2]])
    got, adopted = fresh_answers(path, queries)
    FIGURES.add("answers changed by an older copy", same(got, want))
    assert not adopted and same(got, want) == 0


def worker(path: Path, seed: int, rounds: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, vector_file.SAVE_MIN_ENV: "300",
           "PYTHONPATH": os.pathsep.join([str(WORKER.parents[2]), *sys.path])}  # fmt: skip
    return subprocess.Popen([sys.executable, str(WORKER), str(path), str(seed), str(rounds)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def wait_rounds(process: subprocess.Popen[bytes], rounds: int) -> None:
    assert process.stdout is not None
    for _ in range(rounds):
        if not process.stdout.readline():
            raise AssertionError(f"the worker ended early: {process.stderr.read()!r}")  # type: ignore[union-attr]


@pytest.mark.parametrize("trial", range(3))
def test_kill_during_a_save_never_changes_an_answer(tmp_path: Path, trial: int) -> None:
    """kill -9 at a random moment of a process that saves its copy over and over: a
    fresh process answers as the database does, and its own save sweeps what the killed
    one left (no file of an uncommitted save stays)."""
    path = tmp_path / "m.db"
    rnd = random.Random(trial)
    process = worker(path, trial, 10_000)
    try:
        wait_rounds(process, rnd.randint(3, 8))
        time.sleep(rnd.uniform(0, 0.3))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    FIGURES.add("saves killed", 1)
    left = [f for f in (tmp_path / "m.db.vectors").glob("*") if f.suffix != ".lock"]
    FIGURES.add("copy files the kills left (committed or not)", len(left))
    queries = unit(np.random.default_rng(trial).normal(size=(QUERIES, DIMENSIONS)))
    want = oracle(path, queries)
    got, _ = fresh_answers(path, queries)
    assert same(got, want) == 0
    os.environ[vector_file.SAVE_MIN_ENV] = "300"
    try:
        with open_store(path) as m:  # rewrites a third: its search saves anew
            fill(m, unit(np.random.default_rng(99).normal(size=(600, DIMENSIONS))))
            m.search("ns", query_vector=queries[0].tolist(), top_k=1)
            cache_of(m).saved()
    finally:
        del os.environ[vector_file.SAVE_MIN_ENV]
    left = sorted(f.name for f in (tmp_path / "m.db.vectors").iterdir())
    assert len({name.split(".")[1] for name in left}) == 1, left  # one token: the committed
    assert not [name for name in left if name.endswith(".tmp")]
    got, adopted = fresh_answers(path, queries)
    assert adopted and same(got, oracle(path, queries)) == 0


def test_two_processes_saving_at_once_never_change_an_answer(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_store(path):
        pass  # migrated once, before the two race
    first, second = worker(path, 1, 12), worker(path, 2, 12)
    for process in (first, second):
        assert process.wait(timeout=300) == 0, process.stderr.read()  # type: ignore[union-attr]
    FIGURES.add("racing saves", 2)
    queries = unit(np.random.default_rng(5).normal(size=(QUERIES, DIMENSIONS)))
    got, adopted = fresh_answers(path, queries)
    assert adopted and same(got, oracle(path, queries)) == 0

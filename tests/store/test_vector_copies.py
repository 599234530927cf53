"""The saved vector copies against a brute-force oracle (hypothesis): any sequence of
writes, rewrites, vectors set alone, re-embeddings, hard deletes (through the searching
handle or a second one on the file), saves, reopenings (a handle that adopts the copy)
and damage to a copy file gives every search the answer of an exact cosine over the
vectors the database holds, and no file under the database's name ever holds a byte
of a hard-deleted record's vectors."""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sqlite import vector_file

DIMENSIONS = 8
IDS = 40

#: Writes go through the searching handle or a second one open on the same file
#: (``True``), whose changes the first learns only from the file.
operation = st.one_of(
    st.tuples(
        st.just("write"), st.lists(st.integers(0, IDS - 1), min_size=1, max_size=12), st.booleans()
    ),
    st.tuples(st.just("delete"), st.integers(0, IDS - 1), st.booleans()),
    st.tuples(st.just("set"), st.integers(0, IDS - 1), st.booleans()),
    st.tuples(st.just("reindex"), st.just(0), st.booleans()),
    st.tuples(st.just("save"), st.just(0), st.just(False)),
    st.tuples(st.just("reopen"), st.just(0), st.just(False)),
    st.tuples(st.just("damage"), st.integers(0, 2**16), st.just(False)),
)


def open_store(path: Path) -> erstwhile.Memory:
    return erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)


def cache_of(memory: erstwhile.Memory) -> Any:
    return memory.service.store.dialect._vectors  # type: ignore[attr-defined]


def oracle(path: Path, query: np.ndarray) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT r.id, v.vector FROM records r JOIN vectors v ON v.record = r.rowid"
            " WHERE v.dimensions > 0"
        ).fetchall()
    finally:
        conn.close()
    scored = []
    for record_id, blob in rows:
        vector = np.frombuffer(blob, dtype="<f4")
        scored.append((-float(vector @ query / np.linalg.norm(vector)), record_id))
    return [record_id for _, record_id in sorted(scored)[:5]]


def stored(path: Path, record_id: str) -> bytes:
    conn = sqlite3.connect(path)
    try:
        (vector,) = conn.execute(
            "SELECT v.vector FROM records r JOIN vectors v ON v.record = r.rowid WHERE r.id = ?",
            (record_id,),
        ).fetchone()
    finally:
        conn.close()
    return bytes(vector)


def holds(path: Path, needle: bytes, *, wal: bool = True) -> list[str]:
    """The files under the database's name that hold ``needle``; with ``wal`` false,
    the copies beside it only. A hard delete checkpoints the WAL, but while a reader of
    another handle still needs older frames SQLite copies only those into the file and
    leaves the rest, erased images included, for its next checkpoint: the database and
    its WAL are clean once no reader needs them (closing the last handle, at least)."""
    found = []
    for entry in path.parent.glob(path.name + "*"):
        if not wal and entry.name in (path.name, path.name + "-wal"):
            continue
        for file in entry.rglob("*") if entry.is_dir() else [entry]:
            if file.is_file() and needle in file.read_bytes():
                found.append(file.name)
    return found


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(operation, min_size=1, max_size=14), seed=st.integers(0, 2**16))
def test_copies_never_change_an_answer_nor_keep_an_erased_vector(
    operations: list[tuple[str, Any, bool]], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_file, "SAVE_MIN", 5)
    rng = np.random.default_rng(seed)
    damage = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.db"
        memory = open_store(path)
        second = open_store(path)
        erased: list[bytes] = []  # the vectors of hard-deleted records (each version's)
        written: dict[int, list[bytes]] = {}
        try:
            for kind, argument, elsewhere in operations:
                writer = second if elsewhere else memory
                if kind == "write":
                    ids = sorted(set(argument))
                    vectors = rng.normal(size=(len(ids), DIMENSIONS)).astype(np.float32)
                    writer.upsert("ns", [
                        {"id": f"r{i}", "content": f"r{i} {v[0]}", "vector": v.tolist()}
                        for i, v in zip(ids, vectors, strict=True)
                    ])  # fmt: skip
                    for i in ids:  # as stored (a unit vector), each version's
                        written.setdefault(i, []).append(stored(path, f"r{i}"))
                elif kind == "set" and argument in written:  # its record's row unchanged
                    vector = rng.normal(size=DIMENSIONS).astype(np.float32)
                    writer.set_embedding("ns", f"r{argument}", vector.tolist())
                    written[argument].append(stored(path, f"r{argument}"))
                elif kind == "reindex" and written:  # withdrawn, then the embedder's
                    writer.reindex("ns")
                    for i in written:
                        written[i].append(stored(path, f"r{i}"))
                elif kind == "delete" and argument in written:
                    writer.delete("ns", f"r{argument}", hard=True)
                    erased += written.pop(argument)
                    for vector in erased:  # gone before the delete returned
                        assert holds(path, vector, wal=False) == []
                elif kind == "save":
                    cache = cache_of(memory)
                    with cache._lock:
                        for embedder_id, matrix in cache._matrices.items():
                            cache._save(embedder_id, matrix)
                    cache.saved()
                elif kind == "reopen":
                    memory.close()
                    memory = open_store(path)
                elif kind == "damage":
                    files = sorted((Path(folder) / "m.db.vectors").glob("*.np[yz]"))
                    if files:
                        file = files[argument % len(files)]
                        data = bytearray(file.read_bytes())
                        if data and damage.random() < 0.5:
                            data[damage.randrange(len(data))] ^= 1 << damage.randrange(8)
                        else:
                            del data[len(data) // 2 :]
                        file.write_bytes(bytes(data))
                if written:
                    query = rng.normal(size=DIMENSIONS).astype(np.float32)
                    hits = memory.search("ns", query_vector=query.tolist(), top_k=5,
                                         include_historical=True)  # fmt: skip
                    assert hits.ids() == oracle(path, query)
                cache_of(memory).saved()
                for vector in erased:
                    assert holds(path, vector, wal=False) == []
        finally:
            memory.close()
            second.close()
        for vector in erased:
            assert holds(path, vector) == []


def test_a_vector_written_alone_reaches_every_handle(tmp_path: Path) -> None:
    """A vector written without its record's row (``set_embedding``, the embed job, a
    re-embedding) reaches the matrix of a handle that has read the file before."""
    path = tmp_path / "m.db"
    first, second = open_store(path), open_store(path)
    try:
        axes = np.eye(DIMENSIONS, dtype=np.float32)
        first.upsert("ns", [{"id": f"r{i}", "content": f"r{i}", "vector": axes[i].tolist()}
                            for i in range(3)])  # fmt: skip
        assert first.search("ns", query_vector=axes[5].tolist(), top_k=3).ids() != ["r1"]
        second.set_embedding("ns", "r1", axes[5].tolist())
        assert first.search("ns", query_vector=axes[5].tolist(), top_k=1).ids() == ["r1"]
        second.reindex("ns")  # every vector withdrawn, then the embedder's own
        assert first.search("ns", query_vector=axes[5].tolist(), top_k=3).ids() == oracle(
            path, axes[5])[:3]  # fmt: skip
    finally:
        first.close()
        second.close()

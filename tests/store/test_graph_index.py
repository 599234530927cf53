"""SQLite's graph index (HNSW, erstwhile.store.sqlite.graph_index): a search it answers
returns only the scope's records, with their exact cosine, never a withdrawn, rewritten
or hard-deleted vector, at the recall of an exact search against a brute-force oracle;
writes join a tail scored exactly until absorbed; tombstones are zeroed in the graph
and past a share rebuild it; the breadth calibrated on stored vectors holds on
held-out queries; the graph runs beside the default local model in one process and
changes nothing process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.store.test_vector_index import DIMENSIONS, ROOMS, clustered, search, unit, write

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.store.sqlite import graph_index

SRC = str(Path(__file__).resolve().parents[2] / "src")


def open_graphed(path: str) -> erstwhile.Memory:
    """A handle whose every scope of 20+ vectors goes through the graph (built inside
    the search) once a fifth of the store has started its build."""
    memory = erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
    vectors = cache_of(memory)
    vectors.background, vectors.graph_min_rows, vectors.min_share = False, 20, 0.2
    vectors.graph_rows_per_breadth = 0  # whatever its breadth
    vectors.min_rows = 1 << 62  # the list index never answers here
    return memory


def cache_of(memory: erstwhile.Memory) -> Any:
    return memory.service.store.dialect._vectors  # type: ignore[attr-defined]


def graph_of(memory: erstwhile.Memory) -> graph_index.GraphIndex:
    matrix = next(iter(cache_of(memory)._matrices.values()))
    return matrix.graph  # type: ignore[no-any-return]


# derandomized: the recall bound is statistical; scope membership, exact scores and
# never returning a removed vector are checked on every hit
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow,
                                 HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    seed=st.integers(0, 10_000),
    count=st.integers(40, 200),
    room=st.one_of(st.none(), st.sampled_from(ROOMS)),
    k=st.sampled_from([1, 5, 10]),
    deleted=st.integers(0, 10),
    rewritten=st.integers(0, 10),
    added=st.integers(0, 30),
)
def test_the_graph_returns_only_the_scope_exactly_scored_at_the_recall_of_exact(
    tmp_path_factory: Any, seed: int, count: int, room: str | None, k: int, deleted: int,
    rewritten: int, added: int,
) -> None:  # fmt: skip
    memory = open_graphed(str(tmp_path_factory.mktemp("graph") / "store.db"))
    try:
        vectors = clustered(seed, count + added)
        rng = np.random.default_rng(seed + 1)
        rooms = [ROOMS[i] for i in rng.integers(0, len(ROOMS), count + added)]
        write(memory, vectors[:count], rooms[:count])
        search(memory, vectors[0], 1)  # the whole store: the graph is built
        assert graph_of(memory).ready
        # after the build: hard deletes, rewrites (the old vector must never be found)
        # and additions (the tail, then absorbed)
        picks = rng.choice(count, deleted + rewritten, replace=False)
        gone = {f"m{i}" for i in picks[:deleted]}
        for record_id in gone:
            memory.delete("ns", record_id, hard=True)
        for i in picks[deleted:]:
            vectors[i] = unit(rng.normal(size=DIMENSIONS))
            write(memory, vectors[i : i + 1], [rooms[i]], start=int(i))
        if added:
            write(memory, vectors[count:], rooms[count:], start=count)
        in_scope = [i for i in range(count + added) if f"m{i}" not in gone
                    and (room is None or rooms[i] == room)]  # fmt: skip
        used, recalls = 0, []
        for query in clustered(seed + 2, 20):
            result = search(memory, query, k, **({"filter": {"room": room}} if room else {}))
            exact = np.array([vectors[i] @ query for i in in_scope])
            kth = np.sort(exact)[::-1][min(k, len(in_scope)) - 1]
            best = {f"m{i}" for i, s in zip(in_scope, exact, strict=True) if s >= kth - 1e-6}
            for hit in result.hits:
                index = int(hit.record.id[1:])
                assert index in in_scope, hit.record.id  # in scope, never a deleted one
                assert abs(hit.score - float(vectors[index] @ query)) < 1e-5  # exact, current
                used += hit.signals["semantic"].get("index") == "hnsw"
            assert len(result.hits) == min(k, len(in_scope))
            recalls.append(len(best & set(result.ids())) / len(result.hits))
        assert np.mean(recalls) >= 0.9
        graph = graph_of(memory)
        if room is None:  # the whole store: the graph answers, its tail absorbed
            assert used > 0
            assert graph.tail.shape[0] == 0 and graph.size == count + added - deleted
    finally:
        memory.close()


def test_a_removed_vector_is_zeroed_in_the_graph_and_never_offered(tmp_path: Path) -> None:
    """Another handle rewrites one record and hard-deletes another: their nodes are
    tombstones holding zeros, neither old vector is found, the rewritten one is found
    as it is now."""
    path = str(tmp_path / "store.db")
    reader = open_graphed(path)
    writer = erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
    try:
        vectors = clustered(1, 200)
        write(writer, vectors, ["r0"] * 200)
        assert search(reader, vectors[7], 1).ids() == ["m7"]
        graph = graph_of(reader)
        labels = graph.label_of[graph.label_of >= 0]
        stored = graph_index._stored(graph.index)
        by_id = {int(graph.rowid_of[label]): int(label) for label in labels}
        rowid = dict(reader.service.store.dialect.raw().execute(  # type: ignore[attr-defined]
            "SELECT id, rowid FROM records WHERE id IN ('m7', 'm9')").fetchall())  # fmt: skip
        old7, old9 = by_id[rowid["m7"]], by_id[rowid["m9"]]
        assert np.allclose(stored[old7], vectors[7], atol=1e-6)
        writer.upsert("ns", [{"id": "m7", "content": "moved", "vector": (-vectors[7]).tolist()}])
        writer.delete("ns", "m9", hard=True)
        hits = search(reader, vectors[7], 5).hits
        assert "m7" not in [h.record.id for h in hits] and "m9" not in [h.record.id for h in hits]
        assert {h.signals["semantic"]["index"] for h in hits} == {"hnsw"}
        stored = graph_index._stored(graph.index)
        assert not stored[old7].any() and not stored[old9].any()  # no byte of them left
        assert graph.rowid_of[old7] == -1 and graph.rowid_of[old9] == -1
        again = search(reader, -vectors[7], 1).hits[0]
        assert again.record.id == "m7" and abs(again.score - 1.0) < 1e-5
        assert search(reader, vectors[9], 3).hits[0].record.id != "m9"
    finally:
        reader.close()
        writer.close()


def test_tombstones_past_their_share_build_the_graph_anew(tmp_path: Path) -> None:
    memory = open_graphed(str(tmp_path / "store.db"))
    try:
        vectors = clustered(3, 200)
        write(memory, vectors, ["r0"] * 200)
        search(memory, vectors[0], 1)
        graph = graph_of(memory)
        first = graph.index
        for i in range(40):  # a fifth: under the share, kept
            memory.delete("ns", f"m{i}", hard=True)
        search(memory, vectors[50], 1)
        assert graph.index is first and graph.tombstones == 40
        for i in range(40, 80):  # two fifths: over it
            memory.delete("ns", f"m{i}", hard=True)
        assert search(memory, vectors[90], 1).ids() == ["m90"]
        assert graph.index is not first and graph.tombstones == 0 and graph.size == 120
    finally:
        memory.close()


def test_the_tail_is_scored_exactly_until_absorbed_in_the_background(tmp_path: Path) -> None:
    """With background work on, vectors written after the build are found at once (the
    tail is scored exactly), then joined to the graph by a background absorb."""
    memory = open_graphed(str(tmp_path / "store.db"))
    try:
        vectors = clustered(4, 300 + graph_index.ABSORB_MIN)
        write(memory, vectors[:300], ["r0"] * 300)
        search(memory, vectors[0], 1)
        graph = graph_of(memory)
        cache_of(memory).background = True
        write(memory, vectors[300:301], ["r0"], start=300)
        hit = search(memory, vectors[300], 1).hits[0]
        assert hit.record.id == "m300" and hit.signals["semantic"]["index"] == "hnsw"
        assert graph.tail.shape[0] == 1  # under ABSORB_MIN: stays in the tail
        write(memory, vectors[301:], ["r0"] * (graph_index.ABSORB_MIN - 1), start=301)
        assert search(memory, vectors[-1], 1).ids() == [f"m{299 + graph_index.ABSORB_MIN}"]
        for _ in range(200):  # the absorb runs in its own thread
            if graph.tail.shape[0] == 0 and not graph.absorbing:
                break
            time.sleep(0.05)
        assert graph.tail.shape[0] == 0 and graph.size == 300 + graph_index.ABSORB_MIN
        assert search(memory, vectors[-1], 1).ids() == [f"m{299 + graph_index.ABSORB_MIN}"]
    finally:
        memory.close()


def test_the_calibrated_breadth_holds_on_held_out_queries(tmp_path: Path) -> None:
    """Enough vectors that the calibrated breadth is well under the store: over queries
    drawn like the stored vectors (none stored), whole-store and third-of-the-store
    scopes keep mean recall@10 >= 0.95 against brute force."""
    count = 6000
    memory = open_graphed(str(tmp_path / "store.db"))
    try:
        drawn = clustered(11, count + 100)
        vectors, queries = drawn[:count], drawn[count:]
        rooms = [ROOMS[i % 3] for i in range(count)]
        memory.upsert("ns", [
            {"id": f"m{i}", "content": f"memory {i}", "vector": v.tolist(),
             "metadata": {"room": rooms[i]}}
            for i, v in enumerate(vectors)
        ])  # fmt: skip
        for room in (None, "r0"):
            scope = [i for i in range(count) if room is None or rooms[i] == room]
            recalls = []
            for query in queries:
                result = memory.search("ns", query_vector=query.tolist(), top_k=10,
                                       **({"filter": {"room": room}} if room else {}))  # fmt: skip
                assert {h.signals["semantic"].get("index") for h in result.hits} == {"hnsw"}
                best = {f"m{scope[i]}" for i in np.argsort(-(vectors[scope] @ query))[:10]}
                recalls.append(len(best & set(result.ids())) / 10)
            assert np.mean(recalls) >= 0.95, (room, np.mean(recalls))
        graph = graph_of(memory)
        assert 0 < int(graph.breadths[0]) < count // 10  # a search visits a fraction
    finally:
        memory.close()


def test_the_graph_runs_beside_the_default_local_model(tmp_path: Path) -> None:
    """One process embeds with the default local model (onnxruntime), builds the graph
    in a background thread and searches it, then embeds again (usearch's graph crashed
    beside onnxruntime); the host thread's OpenMP setting is left as it was."""
    script = (
        "import time, faiss, erstwhile\n"
        "before = faiss.omp_get_max_threads()\n"
        "m = erstwhile.open('store.db', background_jobs=False)\n"
        "texts = [f'note {i} about the {w} of the garden' for i in range(120)\n"
        "         for w in ('roses',)]\n"
        "m.upsert('ns', [{'id': str(i), 'content': t} for i, t in enumerate(texts)])\n"
        "cache = m.service.store.dialect._vectors\n"
        "cache.graph_min_rows, cache.graph_rows_per_breadth = 20, 0\n"
        "m.search('ns', 'roses', top_k=3, ranking='semantic')  # starts the build\n"
        "graph = next(iter(cache._matrices.values())).graph\n"
        "for _ in range(600):\n"
        "    if graph.ready: break\n"
        "    time.sleep(0.05)\n"
        "found = m.search('ns', 'note 7 about the roses', top_k=3, ranking='semantic')\n"
        "m.upsert('ns', [{'id': 'late', 'content': 'a late note about tulips'}])\n"
        "late = m.search('ns', 'tulips', top_k=1, ranking='semantic')\n"
        "print(found.hits[0].signals['semantic'].get('index'), late.ids()[0],\n"
        "      faiss.omp_get_max_threads() == before)\n"
        "m.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["hnsw", "late", "True"]


def test_without_faiss_the_lane_answers_as_before(tmp_path: Path, monkeypatch: Any) -> None:
    """faiss that does not load turns the graph off for the process (one attempt, a
    warning): searches are answered exactly, as without an index."""
    attempts = []

    def missing() -> Any:
        attempts.append(1)
        raise ImportError("no faiss here")

    monkeypatch.setattr(graph_index, "_faiss", missing)
    memory = open_graphed(str(tmp_path / "store.db"))
    try:
        vectors = clustered(5, 100)
        write(memory, vectors, ["r0"] * 100)
        for i in range(3):
            hit = search(memory, vectors[i], 1).hits[0]
            assert hit.record.id == f"m{i}" and hit.signals["semantic"].get("index") is None
        assert graph_of(memory).unavailable and len(attempts) == 1
    finally:
        memory.close()


def test_a_scope_too_narrow_for_its_breadth_is_scored_exactly(tmp_path: Path) -> None:
    """A scope holding fewer than ``ROWS_PER_BREADTH`` rows per unit of its calibrated
    breadth is scored exactly (the walk would cost more); a wide one still uses the graph."""
    memory = open_graphed(str(tmp_path / "store.db"))
    try:
        vectors = clustered(6, 600)
        write(memory, vectors, ["r0" if i % 10 == 0 else "r1" for i in range(600)])
        search(memory, vectors[0], 10)  # builds the graph
        cache_of(memory).graph_rows_per_breadth = 1.0
        graph = graph_of(memory)
        narrow = search(memory, vectors[0], 10, filter={"room": "r0"}).hits
        assert int(graph.breadths[7]) > 60  # a tenth's depth: its breadth exceeds 60 rows
        assert {h.signals["semantic"].get("index") for h in narrow} == {None}
        assert {h.signals["semantic"].get("index") for h in search(memory, vectors[0], 10).hits} \
            == {"hnsw"}  # fmt: skip
    finally:
        memory.close()


def test_a_build_in_the_callers_thread_leaves_its_openmp_setting(tmp_path: Path) -> None:
    """A build run in the host's own thread (tests, ``build_vector_index``) asks OpenMP
    for its threads there and gives the thread its setting back."""
    import faiss

    memory = open_graphed(str(tmp_path / "store.db"))
    before = faiss.omp_get_max_threads()
    try:
        faiss.omp_set_num_threads(before + 3)
        write(memory, clustered(7, 100), ["r0"] * 100)
        search(memory, clustered(7, 1)[0], 1)
        assert graph_of(memory).ready
        assert faiss.omp_get_max_threads() == before + 3
    finally:
        faiss.omp_set_num_threads(before)
        memory.close()


def test_close_stops_the_builds_under_way(tmp_path: Path) -> None:
    """A store closed while its graph is being built in the background leaves no
    thread of it running in the host's process, and its graph stops part way."""
    import threading

    memory = erstwhile.open(str(tmp_path / "m.db"), embedder=HashEmbedder(DIMENSIONS),
                            background_jobs=False)  # fmt: skip
    vectors = cache_of(memory)
    vectors.graph_min_rows, vectors.min_share = 20, 0.2  # builds stay in the background
    vectors.min_rows = 1 << 62
    write(memory, clustered(12, 40_000), ["r0"] * 40_000)
    search(memory, unit(np.ones(DIMENSIONS)), 5)  # a wide scope: a build begins
    graph = graph_of(memory)
    assert graph.building or graph.ready
    memory.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("erstwhile-vector")]
    assert not graph.building and graph.stopped and not graph.start()

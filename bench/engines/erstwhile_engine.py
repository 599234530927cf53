"""erstwhile through its Python API: ``erstwhile.open(target)``, ``upsert``, ``search``.

Records carry their precomputed vector; semantic queries pass ``query_vector``. A
hybrid search takes query *text* (SPEC §6: a query_vector has no words for the
lexical lane), which the namespace embedder turns into a vector. So that hybrid is
measured on the same vectors as everything else, the embedder here is the hash
embedder with a lookup table in front: a query text the benchmark generated is
"embedded" as that query's precomputed vector (a dictionary look-up, ~1 µs), any
other text is hashed. Stored records never reach it: they all carry vectors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from bench.engines import Engine, Query
from bench.synth import SpeedData, rfc3339
from erstwhile.embedding import HashEmbedder

NAMESPACE = "bench"

# A fresh process: open the file, one unfiltered and one filtered search (the first
# loads the scope copy and the vector matrix from the file), then its resident memory
# once the matrix's background copy into memory is done (and a search after it).
_COLD = """
import json, sys, time
t = time.perf_counter()
import erstwhile
from erstwhile.embedding import HashEmbedder
m = erstwhile.open(sys.argv[1], embedder=HashEmbedder(384), background_jobs=False)
opened = time.perf_counter() - t
vector = json.loads(sys.argv[2])
t = time.perf_counter()
m.search(sys.argv[3], query_vector=vector, top_k=10, include_historical=True)
first = time.perf_counter() - t
t = time.perf_counter()
m.search(sys.argv[3], query_vector=vector, top_k=10, filter={"room": "room-0"})
second = time.perf_counter() - t
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmRSS:")) / 1024
# an adopted matrix is read and checked before the first search uses it: the
# resident figure after the searches is the process's steady state
resident = rss()
# the third search builds the scope copy (scope_copy.WARM_AFTER): its time and memory
t = time.perf_counter()
m.search(sys.argv[3], query_vector=vector, top_k=10, filter={"room": "room-1"})
third = time.perf_counter() - t
print(json.dumps({"import_open_s": opened, "first_search_s": first,
                  "second_search_filtered_s": second, "rss_mib_after_searches": resident,
                  "rss_mib": resident,
                  "third_search_builds_scope_copy_s": third,
                  "rss_mib_with_scope_copy": rss()}))
"""


@contextmanager
def exact_path(memory: erstwhile.Memory) -> Iterator[None]:
    """Within it, every semantic scope of ``memory``'s SQLite store is scored exactly
    (its vector index switched off): what the exact path costs beside a scan."""
    vectors: Any = memory.service.store.dialect._vectors  # type: ignore[attr-defined]
    saved = vectors.min_rows, vectors.graph_min_rows
    vectors.min_rows = vectors.graph_min_rows = 1 << 62
    try:
        yield
    finally:
        vectors.min_rows, vectors.graph_min_rows = saved


@contextmanager
def index_kind(memory: erstwhile.Memory, kind: str) -> Iterator[None]:
    """Within it, ``memory``'s SQLite store searches through index ``kind`` ("hnsw": the
    graph, the list index until it is built; "ivf": the list index alone)."""
    vectors: Any = memory.service.store.dialect._vectors  # type: ignore[attr-defined]
    saved = vectors.index_kind
    vectors.index_kind = kind
    try:
        yield
    finally:
        vectors.index_kind = saved


class QueryTableEmbedder(HashEmbedder):
    """The hash embedder, except for the benchmark's own query texts."""

    def __init__(self, dimensions: int, table: dict[str, np.ndarray]) -> None:
        super().__init__(dimensions)
        self.table = table

    def embed_query(self, text: str) -> np.ndarray:
        found = self.table.get(text)
        return found if found is not None else super().embed_query(text)


def records(
    data: SpeedData, start: int, stop: int, *, arrays: bool = False
) -> list[dict[str, Any]]:
    """Records ``start``..``stop`` as a caller of the Python API (or a JSON body) gives
    them; ``arrays``: each vector as its row of the float32 matrix (a model's output)
    instead of a list of floats."""
    out = []
    for i in range(start, stop):
        record: dict[str, Any] = {
            "id": data.record_id(i),
            "content": data.texts[i],
            "metadata": {"room": data.room_name(int(data.rooms[i]))},
            "valid_from": rfc3339(int(data.valid_from[i])),
            "vector": data.vectors[i] if arrays else data.vectors[i].tolist(),
        }
        if data.invalidated[i]:
            record["valid_to"] = rfc3339(int(data.valid_to[i]))
        if data.supersedes[i] >= 0:
            record["supersedes"] = [data.record_id(int(data.supersedes[i]))]
        out.append(record)
    return out


class ErstwhileEngine(Engine):
    def __init__(
        self,
        target: str,
        name: str,
        query_table: dict[str, np.ndarray],
        namespace: str = NAMESPACE,
        *,
        keep: bool = False,
    ) -> None:
        super().__init__()
        self.keep = keep  # the store outlives the run (bench --store): built once
        self.name = name
        self.target = target
        self.namespace = namespace
        self.embedder = QueryTableEmbedder(384, query_table)
        self.memory: erstwhile.Memory | None = None

    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        built = Path(self.target + ".ingest.json")
        if self.keep and built.exists():  # a kept store of this size and seed: reuse it
            saved = json.loads(built.read_text())
            if saved["size"] == data.size:
                self.memory = erstwhile.open(self.target, embedder=self.embedder,
                                             background_jobs=False)  # fmt: skip
                return self._after_ingest(data, saved["write_s"], reused=True)
        self.open()
        write = 0.0
        for start in range(0, data.size, batch):
            write += self.ingest_batch(data, start, min(start + batch, data.size))
        if self.keep:
            built.write_text(json.dumps({"size": data.size, "write_s": write}))
        return self._after_ingest(data, write, reused=False)

    def _after_ingest(self, data: SpeedData, write: float, *, reused: bool) -> dict[str, Any]:
        assert self.memory is not None
        # the graph index for wide scopes (SQLite; PostgreSQL builds its own in SQL)
        t = time.perf_counter()
        store: Any = self.memory.service.store  # the SQL store's hook (a bench may peek)
        store.build_vector_index(384)
        index_s = time.perf_counter() - t
        # the first search of a process loads the vector matrix: count it as ingest work
        t = time.perf_counter()
        self.memory.search(self.namespace, query_vector=data.vectors[0].tolist(), top_k=1,
                           include_historical=True)  # fmt: skip
        warm = time.perf_counter() - t
        info: dict[str, Any] = {"write_s": write, "index_s": index_s, "first_search_s": warm}
        if reused:
            info["store_reused"] = True  # write_s is the saved figure of the build
        if "://" not in self.target:  # a SQLite file: its size, and a cold process on it
            files = Path(self.target).parent.glob(Path(self.target).name + "*")
            info["disk_bytes_per_record"] = sum(
                f.stat().st_size for f in files if f.is_file()) / data.size  # fmt: skip
            # the saved matrix and list copies (store/sqlite/vector_file.py), apart: the
            # bytes on disk
            copies = Path(self.target + ".vectors")
            held = sum(f.stat().st_blocks * 512 for f in copies.glob("*") if f.is_file())
            info["vector_copy_bytes_per_record"] = held / data.size
            info["cold_process"] = self.cold_process(data)
        return info

    def open(self) -> None:
        self.memory = erstwhile.open(self.target, embedder=self.embedder, background_jobs=False)

    def ingest_batch(
        self, data: SpeedData, start: int, stop: int, *, arrays: bool = False
    ) -> float:
        """Upserts records ``start``..``stop`` as one batch; returns the call's seconds
        (building the records' dictionaries is the caller's work, not timed);
        ``arrays``: vectors as NumPy rows (:func:`records`)."""
        assert self.memory is not None
        chunk = records(data, start, stop, arrays=arrays)
        t = time.perf_counter()
        self.memory.upsert(self.namespace, chunk)
        return time.perf_counter() - t

    def cold_process(self, data: SpeedData) -> dict[str, float]:
        """The first searches of a fresh process on this file, and its resident memory."""
        assert self.memory is not None
        self.memory.close()  # the fresh process must read the file, not share a cache
        done = subprocess.run(
            [sys.executable, "-c", _COLD, self.target, json.dumps(data.vectors[1].tolist()),
             self.namespace],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        self.memory = erstwhile.open(self.target, embedder=self.embedder, background_jobs=False)
        self.memory.search(self.namespace, query_vector=data.vectors[0].tolist(), top_k=1,
                           include_historical=True)  # fmt: skip
        return {k: round(v, 3) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}

    def search(self, query: Query) -> list[int]:
        assert self.memory is not None
        options: dict[str, Any] = {"top_k": 10}
        if query.room is not None:
            options["filter"] = {"room": query.room}
        if query.at_us is None:
            options["include_historical"] = True
        elif query.case == "semantic_as_of":
            options["as_of"] = rfc3339(query.at_us)
        # else: the default time option, "current"
        if query.case == "lexical":
            result = self.memory.search(self.namespace, query.text, ranking="lexical", **options)
        elif query.case == "hybrid_filtered":
            result = self.memory.search(self.namespace, query.text, ranking="hybrid", **options)
        else:
            result = self.memory.search(
                self.namespace, query_vector=query.vector.tolist(), ranking="semantic", **options
            )
        return [int(hit.record.id[1:]) for hit in result.hits]

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None

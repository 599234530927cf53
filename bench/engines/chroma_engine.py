"""Chroma (embedded ``PersistentClient``), HNSW with cosine distance.

Validity is emulated with numeric metadata (``valid_from``, ``valid_to`` in µs; an
open validity is a far-future number), the room as a string; filters are ``where``
clauses. Chroma's local client has no ranked full-text search (``where_document``
``$contains`` filters, it does not rank), so lexical and hybrid are not measured.
"""

from __future__ import annotations

import time
from typing import Any

import chromadb
from chromadb.config import Settings

from bench.engines import Engine, Query
from bench.synth import SpeedData


def validity(at_us: int) -> list[dict[str, Any]]:
    return [{"valid_from": {"$lte": at_us}}, {"valid_to": {"$gt": at_us}}]


class ChromaEngine(Engine):
    name = "Chroma"
    cases = ("semantic", "semantic_filtered", "semantic_as_of")

    def __init__(self, path: str) -> None:
        super().__init__()
        self.client = chromadb.PersistentClient(
            path=path, settings=Settings(anonymized_telemetry=False)
        )
        self.collection = self.client.create_collection(
            "bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        self.notes.append(f"chromadb {chromadb.__version__}, HNSW defaults, cosine")

    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        batch = min(batch, self.client.get_max_batch_size())
        write = 0.0
        for start in range(0, data.size, batch):
            stop = min(start + batch, data.size)
            ids = [data.record_id(i) for i in range(start, stop)]
            metadatas: list[Any] = [
                {"room": data.room_name(int(data.rooms[i])),
                 "valid_from": int(data.valid_from[i]), "valid_to": int(data.valid_to[i])}
                for i in range(start, stop)
            ]  # fmt: skip
            t = time.perf_counter()
            self.collection.add(
                ids=ids, embeddings=data.vectors[start:stop], metadatas=metadatas,
                documents=data.texts[start:stop],
            )  # fmt: skip
            write += time.perf_counter() - t
        return {"write_s": write, "index_s": 0.0}

    def search(self, query: Query) -> list[int]:
        clauses: list[dict[str, Any]] = []
        if query.room is not None:
            clauses.append({"room": query.room})
        if query.at_us is not None:
            clauses += validity(query.at_us)
        where: Any = {"$and": clauses} if len(clauses) > 1 else (clauses[0] if clauses else None)
        result = self.collection.query(
            query_embeddings=[query.vector], n_results=10, where=where,
            include=["documents", "distances"],
        )  # fmt: skip
        return [int(i[1:]) for i in result["ids"][0]]

"""LanceDB (embedded), an IVF_HNSW_SQ vector index (cosine), scalar indexes on the
filter columns and its native full-text index (BM25) for lexical and hybrid.

Validity is emulated with int64 columns (µs; an open validity is a far-future
number); filters are SQL ``where`` clauses with ``prefilter=True``. Hybrid is
LanceDB's own: vector + full-text, fused by its RRF reranker (k = 60), each leg as
deep as the limit (LanceDB's default). The full-text index is built without stemming
or stop words, as the words are made up.
"""

from __future__ import annotations

import time
from typing import Any

import lancedb
import pyarrow as pa

from bench.engines import Engine, Query
from bench.synth import DIMENSIONS, SpeedData


def where_clause(query: Query) -> str | None:
    clauses = []
    if query.room is not None:
        clauses.append(f"room = '{query.room}'")
    if query.at_us is not None:
        clauses.append(f"valid_from <= {query.at_us} AND valid_to > {query.at_us}")
    return " AND ".join(clauses) or None


class LanceEngine(Engine):
    name = "LanceDB"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.db = lancedb.connect(path)
        self.table: Any = None
        self.notes.append(
            f"lancedb {lancedb.__version__}, IVF_HNSW_SQ (cosine), BITMAP/BTREE scalar "
            "indexes, native FTS"
        )

    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        write = 0.0
        vector_type = pa.list_(pa.float32(), DIMENSIONS)
        for start in range(0, data.size, batch):
            stop = min(start + batch, data.size)
            flat = pa.array(data.vectors[start:stop].ravel(), type=pa.float32())
            table = pa.table(
                {
                    "id": pa.array(range(start, stop), type=pa.int64()),
                    "text": data.texts[start:stop],
                    "room": [data.room_name(int(r)) for r in data.rooms[start:stop]],
                    "valid_from": pa.array(data.valid_from[start:stop], type=pa.int64()),
                    "valid_to": pa.array(data.valid_to[start:stop], type=pa.int64()),
                    "vector": pa.FixedSizeListArray.from_arrays(flat, DIMENSIONS).cast(vector_type),
                }
            )
            t = time.perf_counter()
            if self.table is None:
                self.table = self.db.create_table("bench", table)
            else:
                self.table.add(table)
            write += time.perf_counter() - t
        t = time.perf_counter()
        self.table.create_index(metric="cosine", index_type="IVF_HNSW_SQ")
        self.table.create_scalar_index("room", index_type="BITMAP")
        self.table.create_scalar_index("valid_from", index_type="BTREE")
        self.table.create_scalar_index("valid_to", index_type="BTREE")
        self.table.create_fts_index(
            "text", stem=False, remove_stop_words=False, ascii_folding=False
        )
        index = time.perf_counter() - t
        return {"write_s": write, "index_s": index}

    def search(self, query: Query) -> list[int]:
        where = where_clause(query)
        # the score columns are named so LanceDB does not warn that it adds them
        if query.case == "lexical":
            builder = self.table.search(query.text, query_type="fts")
            columns = ["id", "text", "_score"]
        elif query.case == "hybrid_filtered":
            builder = self.table.search(query_type="hybrid").vector(query.vector).text(query.text)
            columns = ["id", "text"]
        else:
            builder = self.table.search(query.vector).distance_type("cosine")
            columns = ["id", "text", "_distance"]
        if where is not None:
            builder = builder.where(where, prefilter=True)
        result = builder.select(columns).limit(10).to_arrow()
        return [int(i) for i in result.column("id").to_pylist()]

"""Raw sqlite-vec + FTS5: what a user would hand-build on SQLite without erstwhile.

One ``vec0`` table (``room`` as a partition key, ``valid_from``/``valid_to`` as
metadata columns in µs — vec0 metadata cannot be NULL, so an open validity is a
far-future number — and the text as an auxiliary column), one FTS5 table with the same
rowids, and a plain table of the filter columns for the full-text leg to join. sqlite-vec
0.1.9 is brute force (no ANN index). Hybrid runs both legs 50 deep with the same filter
and fuses them in Python by RRF (k = 60), as erstwhile does. The driver is ``sqlean.py``
(the stdlib ``sqlite3`` here cannot load extensions).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import sqlean
import sqlite_vec

from bench.engines import Engine, Query
from bench.synth import DIMENSIONS, SpeedData
from bench.truth import LANE_DEPTH, rrf


def fts_query(text: str) -> str:
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(text.split()))


class SqliteVecEngine(Engine):
    name = "sqlite-vec + FTS5"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.conn = sqlean.connect(path, isolation_level=None)
        self.conn.enable_load_extension(True)
        sqlite_vec.load(self.conn)
        self.conn.enable_load_extension(False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        version = self.conn.execute("SELECT vec_version()").fetchone()[0]
        self.notes.append(f"sqlite-vec {version} (brute force), SQLite {sqlean.sqlite_version}")
        self.conn.execute(
            "CREATE VIRTUAL TABLE vec_items USING vec0(id INTEGER PRIMARY KEY,"
            " room TEXT PARTITION KEY, valid_from INTEGER, valid_to INTEGER,"
            f" embedding FLOAT[{DIMENSIONS}] distance_metric=cosine, +text TEXT)"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')"
        )
        self.conn.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, room TEXT NOT NULL,"
            " valid_from INTEGER NOT NULL, valid_to INTEGER NOT NULL)"
        )
        self.conn.execute("CREATE INDEX items_room ON items (room, valid_to)")

    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        write = 0.0
        for start in range(0, data.size, batch):
            write += self.ingest_batch(data, start, min(start + batch, data.size))
        return {"write_s": write, "index_s": 0.0}

    def ingest_batch(self, data: SpeedData, start: int, stop: int) -> float:
        """Writes records ``start``..``stop`` in one transaction; returns its seconds."""
        rows = [
            (i, data.room_name(int(data.rooms[i])), int(data.valid_from[i]),
             int(data.valid_to[i]), data.vectors[i].tobytes(), data.texts[i])
            for i in range(start, stop)
        ]  # fmt: skip
        t = time.perf_counter()
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO vec_items (id, room, valid_from, valid_to, embedding, text)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.conn.executemany(
            "INSERT INTO fts (rowid, text) VALUES (?, ?)", [(r[0], r[5]) for r in rows]
        )
        self.conn.executemany(
            "INSERT INTO items (id, room, valid_from, valid_to) VALUES (?, ?, ?, ?)",
            [r[:4] for r in rows],
        )
        self.conn.execute("COMMIT")
        return time.perf_counter() - t

    def _vector(self, query: Query, k: int) -> list[int]:
        sql = "SELECT id, distance, text FROM vec_items WHERE embedding MATCH ? AND k = ?"
        params: list[Any] = [np.asarray(query.vector, dtype=np.float32).tobytes(), k]
        if query.room is not None:
            sql += " AND room = ?"
            params.append(query.room)
        if query.at_us is not None:
            sql += " AND valid_from <= ? AND valid_to > ?"
            params += [query.at_us, query.at_us]
        return [row[0] for row in self.conn.execute(sql + " ORDER BY distance", params)]

    def _lexical(self, query: Query, k: int) -> list[int]:
        if query.room is None and query.at_us is None:
            sql = "SELECT rowid, text FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?"
            params: list[Any] = [fts_query(query.text), k]
        else:
            sql = (
                "SELECT f.rowid, f.text FROM fts f JOIN items i ON i.id = f.rowid WHERE fts MATCH ?"
            )
            params = [fts_query(query.text)]
            if query.room is not None:
                sql += " AND i.room = ?"
                params.append(query.room)
            if query.at_us is not None:
                sql += " AND i.valid_from <= ? AND i.valid_to > ?"
                params += [query.at_us, query.at_us]
            sql += " ORDER BY bm25(fts) LIMIT ?"
            params.append(k)
        return [row[0] for row in self.conn.execute(sql, params)]

    def search(self, query: Query) -> list[int]:
        if query.case == "lexical":
            return self._lexical(query, 10)
        if query.case == "hybrid_filtered":
            lanes = [self._lexical(query, LANE_DEPTH), self._vector(query, LANE_DEPTH)]
            return rrf(lanes)[:10]
        return self._vector(query, 10)

    def close(self) -> None:
        self.conn.close()

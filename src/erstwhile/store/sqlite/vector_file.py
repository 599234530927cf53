"""A saved copy of the vector matrix (and its list index) beside the SQLite file, so a
fresh process starts from it instead of reading every vector row.

Reading a million vectors from the ``vectors`` table costs seconds; mapping a file of
them costs nothing until a row is read. The copy is a cache of the file and never a
second truth (SPEC §12): it records the ``vectors.seq`` it holds every vector up to,
a process that adopts it reads every vector written since from the table, and it is
adopted only when the table still holds, at that ``seq``, the very vector the copy
holds for that record (a restored or replaced database file fails that test and its
matrix is read from the table again). A copy that is missing, unreadable or of other
dimensions is ignored; deleting the directory loses nothing.

Files, in ``<database>.vectors/`` (``NAME`` = a digest of the embedder id):
``NAME.json`` (what the copy holds, written last: the commit point), ``NAME.rows.npy``
(the vectors, in matrix order, then ``HEADROOM`` empty rows), ``NAME.rowids.npy``
(each row's record rowid, -1 for a withdrawn one) and ``NAME.ivf.npz`` (the list
index, when one was built: its centroids, each list's rowids, its calibrated probes;
a few bytes per vector, read whole by a fresh process and checked against the rows).
A copy of an older format keeps its matrix; its HNSW graph is ignored (built anew as
lists).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from erstwhile.store.sqlite.vectors import _Matrix

#: A matrix of fewer vectors is read from the table every time (cheap), never saved.
SAVE_MIN = 10_000
FORMAT = 3
#: Rows of room the saved matrix file has past its vectors, as a share of them (a
#: sparse tail: no disk is used until written): a fresh process takes the vectors
#: written since the save into the mapping instead of copying the whole matrix to grow
#: it (1.5-2 s at 100k on the loaded machine).
HEADROOM = 0.25


def folder(database: str) -> Path | None:
    """Where a database's copies live; None for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database + ".vectors")


def _name(embedder_id: str) -> str:
    return hashlib.sha256(embedder_id.encode()).hexdigest()[:24]


def save(where: Path, embedder_id: str, matrix: _Matrix) -> None:
    """Writes the matrix (and its index, when built) as of ``matrix.seq``. Never raises
    for a folder that cannot be written: the copy is only a speed-up."""
    base = where / _name(embedder_id)
    index = matrix.index
    try:
        where.mkdir(exist_ok=True)
        rowids = np.full(matrix.count, -1, dtype=np.int64)
        present = np.flatnonzero(matrix.position >= 0)
        rowids[matrix.position[present]] = present
        meta: dict[str, Any] = {
            "format": FORMAT, "embedder_id": embedder_id, "dimensions": matrix.dimensions,
            "seq": matrix.seq, "count": matrix.count, "index": "ivf" if index.ready else None,
        }  # fmt: skip
        parts: dict[str, Callable[[Any], object]] = {
            ".rows.npy": lambda out: _save_rows(out, matrix.rows[: matrix.count]),
            ".rowids.npy": lambda out: np.save(out, rowids),
        }
        if index.centroids is not None:
            lists, centroids = index.members, index.centroids
            arrays: dict[str, Any] = {
                "centroids": centroids, "members": np.concatenate(lists),
                "sizes": np.asarray([m.shape[0] for m in lists], dtype=np.int64),
                "probes": index.probes, "trained": np.int64(index.trained),
            }  # fmt: skip
            if index.runs is not None and index.layout == matrix.layout:
                arrays["runs"] = index.runs  # where the saved rows hold each list's run
            parts[".ivf.npz"] = lambda out: np.savez(out, **arrays)
        Path(str(base) + ".json").unlink(missing_ok=True)  # the old copy is void from here
        Path(str(base) + ".graph").unlink(missing_ok=True)  # format 2's HNSW graph
        for suffix, write in parts.items():
            temporary = Path(f"{base}{suffix}.{os.getpid()}.tmp")
            with open(temporary, "wb") as out:
                write(out)
            os.replace(temporary, str(base) + suffix)
        temporary = Path(f"{base}.json.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(meta))
        os.replace(temporary, str(base) + ".json")
    except OSError:
        return


def _save_rows(out: Any, rows: np.ndarray) -> None:
    """``rows`` as a .npy file of ``HEADROOM`` more rows, the extra ones a hole."""
    capacity = rows.shape[0] + max(1024, int(rows.shape[0] * HEADROOM))
    header = {"descr": "<f4", "fortran_order": False, "shape": (capacity, rows.shape[1])}
    np.lib.format.write_array_header_1_0(out, header)
    start = out.tell()
    out.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
    out.truncate(start + capacity * rows.shape[1] * 4)


def load(
    where: Path, conn: sqlite3.Connection, embedder_id: str, dimensions: int
) -> tuple[dict[str, Any], np.ndarray, np.ndarray, Any] | None:
    """The saved copy (its meta, rows mapped copy-on-write, rowids, the index's
    ``ListIndex.install`` arguments or None), if it is this embedder's, of these
    dimensions, and the table agrees with it: its seq counter has reached the copy's,
    and the newest vector row at or below the copy's seq is what the copy holds for that
    record. A saved index must hold exactly the copy's present rowids."""
    base = where / _name(embedder_id)
    try:
        meta = json.loads(Path(str(base) + ".json").read_text())
        if meta.get("format") not in (1, 2, FORMAT) or (  # 1: without room; 2: a graph
            meta.get("embedder_id"),
            meta.get("dimensions"),
        ) != (embedder_id, dimensions):
            return None
        seq = int(meta["seq"])
        (counter,) = conn.execute("SELECT value FROM vector_seq").fetchone()
        newest = conn.execute(
            "SELECT record, dimensions, vector FROM vectors WHERE embedder_id = ?"
            " AND seq <= ? ORDER BY seq DESC LIMIT 1", (embedder_id, seq),
        ).fetchone()  # fmt: skip
        if counter < seq or newest is None:
            return None
        rows = np.load(str(base) + ".rows.npy", mmap_mode="c")
        rowids = np.load(str(base) + ".rowids.npy")
        count = int(meta["count"])
        if rows.shape[1:] != (dimensions,) or rows.shape[0] < count or rowids.shape != (count,):
            return None
        held = np.flatnonzero(rowids == newest[0])
        if bool(newest[1]) != bool(held.shape[0]):
            return None
        if held.shape[0] and rows[held[0]].astype("<f4").tobytes() != bytes(newest[2]):
            return None
        index = _load_index(Path(str(base) + ".ivf.npz"), rowids, dimensions) if meta.get(
            "index") == "ivf" else None  # fmt: skip
        if meta.get("index") == "ivf" and index is None:
            return None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return meta, rows, rowids, index


def _load_index(path: Path, rowids: np.ndarray, dimensions: int) -> tuple[Any, ...] | None:
    """A saved index's parts, when its lists hold each present rowid of the copy once;
    its lists' runs of rows when saved, in order and within the rows (else None)."""
    with np.load(path) as saved:
        centroids, members = saved["centroids"], saved["members"]
        sizes, probes, trained = saved["sizes"], saved["probes"], int(saved["trained"])
        runs = saved["runs"] if "runs" in saved.files else None
    present = rowids[rowids >= 0]
    if centroids.ndim != 2 or centroids.shape[1] != dimensions:
        return None
    if runs is not None and (
        runs.shape != (centroids.shape[0] + 1,) or int(runs[0]) < 0
        or bool((np.diff(runs) < 0).any()) or int(runs[-1]) > rowids.shape[0]
    ):  # fmt: skip
        runs = None  # the lists are still good; their rows are gathered
    if sizes.shape != (centroids.shape[0],) or int(sizes.sum()) != members.shape[0]:
        return None
    if members.shape[0] != present.shape[0]:
        return None
    if members.shape[0]:
        top = max(int(members.max()), int(present.max()))
        if int(members.min()) < 0:
            return None
        held = np.zeros(top + 1, dtype=bool)
        held[members] = True
        if int(np.count_nonzero(held)) != members.shape[0] or not held[present].all():
            return None
    lists = np.split(members, np.cumsum(sizes)[:-1])
    return centroids, lists, probes, trained, runs

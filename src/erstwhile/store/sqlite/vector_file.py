"""A saved copy of the vector matrix (and its list index) beside the SQLite file, so a
fresh process starts from it instead of reading every vector row.

Reading a million vectors from the ``vectors`` table costs seconds; reading a file of
them costs a pass over its bytes. The copy is a cache of the file and never a second
truth (SPEC §12), with its commit point in the database: a save writes its files under
a fresh token, fsyncs and renames them, and only then records in ``vector_copies``
(migration m017) the token, the ``scope_log`` seq the copy holds every change up to, its
row count and a checksum of every byte of its files (XXH3, 64 bits: :func:`_summer`).
A process adopts a copy only when that row names it and the bytes it reads have that
checksum (a torn, bit-flipped, truncated or older file fails one or the other), then
reads the vectors of every record logged since from the table
(:mod:`erstwhile.store.sqlite.change_log`); anything else is rebuilt from the table.
Deleting the directory loses nothing.

A hard delete erases its record from every copy before it returns (:func:`erase`, in
the delete's own transaction): it deletes the ``vector_copies`` rows of the record's
embedders and removes their files, those of saves under way included (every process's
matrix drops the row on its next refresh: the delete is logged in ``scope_log``). A
save that held the record commits nothing: its commit (:func:`commit`, under the write
lock) finds the record logged after its seq and gone, and removes its files instead.

Files, in ``<database>.vectors/`` (``NAME`` = a digest of the embedder id, ``TOKEN`` =
the save's): ``NAME.TOKEN.rows.npy`` (the vectors, in matrix order; a withdrawn one's
row is zeros), ``NAME.TOKEN.rowids.npy`` (each row's record rowid, -1 for a withdrawn
one), ``NAME.TOKEN.ivf.npz`` (the list index, when one was built: its centroids, each
list's rowids, its calibrated probes, the lists' runs of rows) and ``NAME.TOKEN.lock``
(held by the saving process, so another's sweep leaves a save under way alone). A
committed save sweeps every other file of its embedder not held by a live save (older
copies, those of a save killed midway, those of an older format).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zipfile import BadZipFile

import numpy as np
import xxhash

from erstwhile.store.sqlite.change_log import changes_since

try:
    import fcntl
except ImportError:  # no flock (Windows): no copies are saved, every matrix is read
    fcntl = None  # type: ignore[assignment]

#: A matrix of fewer vectors is read from the table every time (cheap), never saved.
SAVE_MIN = 10_000
#: The environment variable a test sets to save smaller matrices (read at open).
SAVE_MIN_ENV = "ERSTWHILE_TEST_VECTOR_SAVE_MIN"
FORMAT = 5  # 5: XXH3 checksums (4: CRC-32)
#: Rows of room an adopted matrix has past its vectors, as a share of them (pages not
#: touched until written): the vectors written since the save go there instead of
#: growing the matrix by a copy.
HEADROOM = 0.25
_SUFFIXES = (".rows.npy", ".rowids.npy", ".ivf.npz")
_CHUNK_ROWS = 16384  # rows copied, checksummed and written (or read) at a time


def save_min() -> int:
    """The least vectors a saved matrix holds: ``SAVE_MIN`` unless a test lowered it."""
    given = os.environ.get(SAVE_MIN_ENV, "")
    return int(given) if given.isdigit() else SAVE_MIN


def folder(database: str) -> Path | None:
    """Where a database's copies live; None for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database + ".vectors")


def _name(embedder_id: str) -> str:
    return hashlib.sha256(embedder_id.encode()).hexdigest()[:24]


def _summer() -> Any:
    """The checksum a copy's bytes are summed with, in the order written: XXH3 (64
    bits), ~5x faster than CRC-32 here (154 MB: 40 ms against 230 ms), which a fresh
    process pays on every byte it adopts."""
    return xxhash.xxh3_64()


def _signed(summer: Any) -> int:
    """The sum as SQLite's signed 64-bit INTEGER holds it."""
    value = int(summer.intdigest())
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class IndexParts:
    """A list index as saved: ``ListIndex.install``'s arguments and the lists' runs."""

    centroids: np.ndarray
    members: list[np.ndarray]
    probes: np.ndarray
    trained: int
    runs: np.ndarray | None


@dataclass(frozen=True)
class Snapshot:
    """What one save writes, taken under the cache's lock in a few milliseconds:
    ``rows[:len(rowids)]`` are read while the writer runs (a row rewritten meanwhile
    may be saved either way: its newer vector's seq is past ``seq``, so an adopter
    reads it again from the table)."""

    embedder_id: str
    dimensions: int
    seq: int
    rows: np.ndarray
    rowids: np.ndarray  # row -> record rowid, -1 = withdrawn (a copy)
    index: IndexParts | None


@dataclass(frozen=True)
class Saved:
    """An adopted copy: its seq, its rows (in memory, with ``HEADROOM`` room past
    ``len(rowids)``), rowids and index."""

    seq: int
    rows: np.ndarray
    rowids: np.ndarray
    index: IndexParts | None


@dataclass(frozen=True)
class Written:
    token: str
    checksum: int
    lock: Any  # the open lock file, held until the commit is decided


def write(where: Path, snapshot: Snapshot) -> Written | None:
    """Writes the snapshot's files under a new token, each fsynced before its rename,
    then the directory. None when the folder cannot be written (the copy is only a
    speed-up): nothing of this save is left then."""
    if fcntl is None:
        return None
    token = secrets.token_hex(8)
    base = f"{where / _name(snapshot.embedder_id)}.{token}"
    lock = None
    try:
        where.mkdir(exist_ok=True)
        lock = open(base + ".lock", "wb")  # noqa: SIM115 - held until the commit
        fcntl.flock(lock, fcntl.LOCK_EX)
        summer = _summer()
        _write_file(base + ".rows.npy", _rows_parts(snapshot), summer)
        _write_file(base + ".rowids.npy", iter([_npy(snapshot.rowids)]), summer)
        if snapshot.index is not None:
            _write_file(base + ".ivf.npz", iter([_ivf(snapshot.index)]), summer)
        _fsync_folder(where)
    except OSError:
        _remove(where, _name(snapshot.embedder_id), {token})
        if lock is not None:
            lock.close()
        return None
    return Written(token, _signed(summer), lock)


def _rows_parts(snapshot: Snapshot) -> Iterator[memoryview]:
    count, rows = snapshot.rowids.shape[0], snapshot.rows
    header = io.BytesIO()
    shape = (count, snapshot.dimensions)
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    yield header.getbuffer()
    for start in range(0, count, _CHUNK_ROWS):  # a copy: what is summed is what is written
        chunk = np.array(rows[start : min(count, start + _CHUNK_ROWS)], dtype="<f4", order="C")
        yield chunk.data.cast("B")


def _npy(array: np.ndarray) -> memoryview:
    out = io.BytesIO()
    np.save(out, array)
    return out.getbuffer()


def _ivf(index: IndexParts) -> memoryview:
    arrays: dict[str, Any] = {
        "centroids": index.centroids,
        "members": np.concatenate(index.members) if index.members else np.zeros(0, np.int64),
        "sizes": np.asarray([m.shape[0] for m in index.members], dtype=np.int64),
        "probes": index.probes, "trained": np.int64(index.trained),
    }  # fmt: skip
    if index.runs is not None:
        arrays["runs"] = index.runs
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getbuffer()


def _write_file(path: str, parts: Iterator[memoryview], summer: Any) -> None:
    temporary = path + ".tmp"
    with open(temporary, "wb", buffering=0) as out:
        for part in parts:
            summer.update(part)
            out.write(part)
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _fsync_folder(where: Path) -> None:
    handle = os.open(where, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


_COPY = "SELECT token, seq, count, dimensions, checksum, format FROM vector_copies"


def commit(conn: sqlite3.Connection, where: Path, snapshot: Snapshot, written: Written) -> bool:
    """Records the written copy in ``vector_copies`` (under the write lock) and sweeps
    the embedder's other files, unless the copy is void: a record it holds was erased
    (hard-deleted) after its seq (or ``scope_log`` no longer says), or a copy of a later
    seq is recorded, or a hard delete removed its files meanwhile. A void copy's files
    are removed. Whether it committed."""
    name = _name(snapshot.embedder_id)
    base = f"{where / name}.{written.token}"
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            held = conn.execute(f"{_COPY} WHERE embedder_id = ?", (snapshot.embedder_id,))
            recorded = held.fetchone()
            suffixes = _SUFFIXES if snapshot.index is not None else _SUFFIXES[:2]
            erased = erased_since(conn, snapshot.seq)
            void = (
                (recorded is not None and int(recorded[1]) > snapshot.seq)
                or erased is None
                or bool(np.isin(erased, snapshot.rowids).any())
                or not all(os.path.exists(base + suffix) for suffix in suffixes)
            )
            if void:
                _remove(where, name, {written.token})
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO vector_copies (embedder_id, token, seq, count,"
                    " dimensions, checksum, format) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (snapshot.embedder_id, written.token, snapshot.seq,
                     int(snapshot.rowids.shape[0]), snapshot.dimensions,
                     written.checksum, FORMAT),
                )  # fmt: skip
                sweep(where, name, written.token)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except (sqlite3.Error, OSError):
        _remove(where, name, {written.token})
        return False
    finally:
        written.lock.close()
    return not void


def abandon(where: Path, snapshot: Snapshot, written: Written) -> None:
    """Removes the files of a save that will not be committed."""
    _remove(where, _name(snapshot.embedder_id), {written.token})
    written.lock.close()


def sweep(where: Path, name: str, keep: str | None) -> None:
    """Removes the files of embedder ``name`` but token ``keep``'s and those of saves
    under way (their lock is held)."""
    idle: set[str] = set()
    if fcntl is None:
        return
    for token in {part.split(".")[1] for part in _files(where, name)} - {keep}:
        lock = where / f"{name}.{token}.lock"
        try:
            with open(lock, "rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except FileNotFoundError:
            pass  # no lock: another format's file, or a save that ended
        except OSError:
            continue  # held: a save under way
        idle.add(token)
    _remove(where, name, idle)


def _files(where: Path, name: str) -> list[str]:
    try:
        return [f for f in os.listdir(where) if f.startswith(name + ".")]
    except OSError:
        return []


def _remove(where: Path, name: str, tokens: set[str] | None) -> None:
    """Removes embedder ``name``'s files of these tokens (None: every file of it)."""
    for file in _files(where, name):
        if tokens is None or file.split(".")[1] in tokens:
            with contextlib.suppress(OSError):
                os.unlink(where / file)


def erase(tx: Any, where: Path | None, rowid: int) -> None:
    """Before a hard delete removes record ``rowid`` (in its transaction): voids every
    copy of an embedder that holds a vector of the record (or held one: its past
    vectors) and removes their files, those of saves under way included. (Every
    process's matrix drops the record on its next refresh: its row's delete is logged
    in ``scope_log``.)"""
    embedders = [
        row[0]
        for row in tx.execute(
            "SELECT embedder_id FROM vectors WHERE record = ?1"
            " UNION SELECT embedder_id FROM past_vectors WHERE record = ?1",
            (rowid,),
        )
    ]
    if not embedders:
        return
    marks = ", ".join("?" for _ in embedders)
    tx.execute(f"DELETE FROM vector_copies WHERE embedder_id IN ({marks})", embedders)
    if where is not None:
        for embedder_id in embedders:
            _remove(where, _name(embedder_id), None)


def erased_since(conn: sqlite3.Connection, seq: int) -> np.ndarray | None:
    """The records hard-deleted after ``scope_log`` entry ``seq`` (logged, their rows
    gone), or None when entries after it were pruned (nothing can be said)."""
    changes, _, pruned = changes_since(conn, seq)
    if pruned:
        return None
    if not changes:
        return np.zeros(0, np.int64)
    rows = conn.execute(
        "SELECT DISTINCT l.record FROM scope_log l WHERE l.seq > ?"
        " AND NOT EXISTS (SELECT 1 FROM records r WHERE r.rowid = l.record)",
        (seq,),
    )
    return np.fromiter((row[0] for row in rows), np.int64)


def load(where: Path, conn: sqlite3.Connection, embedder_id: str, dimensions: int) -> Saved | None:
    """The copy ``vector_copies`` records for this embedder (in ``conn``'s read), read
    into memory, when it is of these dimensions and its files hold exactly what was
    recorded (its checksum, its row count); else None (the matrix is read from the
    table). A saved index must hold exactly the copy's present rowids."""
    recorded = conn.execute(f"{_COPY} WHERE embedder_id = ?", (embedder_id,)).fetchone()
    if recorded is None:
        return None
    token, seq, count, held_dimensions, checksum, format_ = recorded
    if (held_dimensions, format_) != (dimensions, FORMAT):
        return None
    base = f"{where / _name(embedder_id)}.{token}"
    try:  # every byte checked before any is parsed
        summer = _summer()
        rows = _read_rows(base + ".rows.npy", int(count), dimensions, summer)
        listed = Path(base + ".rowids.npy").read_bytes()
        summer.update(listed)
        lists = Path(base + ".ivf.npz").read_bytes() if os.path.exists(base + ".ivf.npz") else None
        if lists is not None:
            summer.update(lists)
        if _signed(summer) != int(checksum):
            return None
        rowids = np.load(io.BytesIO(listed))
        if rowids.shape != (int(count),) or rowids.dtype != np.int64:
            return None
        index = None if lists is None else _load_index(lists, rowids, dimensions)
        if lists is not None and index is None:
            return None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, EOFError, BadZipFile):
        return None
    return Saved(int(seq), rows, rowids, index)


def _read_rows(path: str, count: int, dimensions: int, summer: Any) -> np.ndarray:
    """The saved rows, read into a matrix with room past them, every byte read summed
    into ``summer``."""
    with open(path, "rb", buffering=0) as source:
        head = io.BytesIO(source.read(4096))
        try:  # numpy parses the header as a Python literal: a flipped byte raises anything
            version = np.lib.format.read_magic(head)
            if version != (1, 0):
                raise ValueError("not a format 1.0 .npy file")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(head)
        except Exception as error:
            raise ValueError(f"not a rows file: {error}") from error
        if shape != (count, dimensions) or fortran or dtype != np.dtype("<f4"):
            raise ValueError("not the recorded shape")
        offset = head.tell()
        summer.update(head.getbuffer()[:offset])
        source.seek(offset)
        rows = np.empty((count + max(1024, int(count * HEADROOM)), dimensions), np.float32)
        data = rows[:count].data.cast("B")
        step = _CHUNK_ROWS * dimensions * 4
        for start in range(0, len(data), step):
            part = data[start : start + step]
            got = 0
            while got < len(part):
                read = source.readinto(part[got:])
                if not read:
                    raise EOFError("the rows file is short")
                got += read
            summer.update(part)
        if source.read(1):
            raise ValueError("the rows file is long")
    return rows


def _load_index(blob: bytes, rowids: np.ndarray, dimensions: int) -> IndexParts | None:
    """A saved index's parts, when its lists hold each present rowid of the copy once;
    its lists' runs of rows when saved, in order and within the rows (else None)."""
    with np.load(io.BytesIO(blob)) as saved:
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
    return IndexParts(centroids, lists, probes, trained, runs)

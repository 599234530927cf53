"""Benchmark of ``mine``: this repository's own ``src/`` and ``docs/``, hash embedder.

    python -m bench.mining [--repeats 3] [--pg URL] [--out bench/results/mining.json]

Copies ``src/`` and ``docs/`` to a temporary folder (so the input cannot change
under the run), then, ``--repeats`` times on a fresh store each:

- **first mine**: every file read, chunked, embedded (hash) and written;
- **re-mine, nothing changed**: every file read and chunked again, nothing written;
- **re-mine, one paragraph edited**: one chunk superseded.

Two floors are measured in the same run, so the figures read as ratios on a noisy
machine: **read floor** — walking the folder and reading and hashing every mined file,
which any re-mine must do; **upsert floor** — writing the same chunks as plain records
through ``upsert`` in batches of the same size (no scan, no chunking, no matching).
Medians of the repeats; the machine's load average is recorded beside them.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import erstwhile
from bench.common import REPO, RESULTS, log, machine, stamp, write_json
from erstwhile.jobs.chunking import chunk_document
from erstwhile.jobs.folder import read, scan
from erstwhile.jobs.mining import MineReport

NAMESPACE = "bench"
BATCH = 500


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def read_floor(folder: Path) -> tuple[int, int]:
    """Walks and reads every document as mining does; returns (files, bytes)."""
    files = size = 0
    for document in scan(folder):
        data = document.file.read_bytes()
        hashlib.sha256(data).hexdigest()
        files += 1
        size += len(data)
    return files, size


def chunks_of(folder: Path) -> list[dict[str, Any]]:
    records = []
    for document in scan(folder):
        text = read(document)
        if text is not None:
            for chunk in chunk_document(text.content, document.kind):
                records.append({"content": chunk.content, "kind": "document"})
    return records


def edit_one_paragraph(folder: Path) -> None:
    target = folder / "docs" / "importing.md"
    text = target.read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    prose = [i for i, p in enumerate(paragraphs) if p[:1].isalpha() and len(p) > 200]
    middle = prose[len(prose) // 2]  # a paragraph of prose, not a heading or a fence
    paragraphs[middle] = paragraphs[middle] + " (edited)"
    target.write_text("\n\n".join(paragraphs), encoding="utf-8")


def store_target(pg: str | None, root: Path, n: int) -> tuple[str, Callable[[], None]]:
    if pg is None:
        return str(root / f"mine-{n}.db"), lambda: None
    import psycopg

    from erstwhile.store.postgres.connection import with_schema

    schema = f"bench_mine_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())

    def drop() -> None:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())

    return with_schema(pg, schema), drop


def one_round(folder: Path, target: str, floor_target: str) -> dict[str, Any]:
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        first_s, first = timed(lambda: m.mine(NAMESPACE, folder, batch_size=BATCH))
        again_s, again = timed(lambda: m.mine(NAMESPACE, folder, batch_size=BATCH))
        edit_one_paragraph(folder)
        edit_s, edited = timed(lambda: m.mine(NAMESPACE, folder, batch_size=BATCH))
    read_s, _ = timed(lambda: read_floor(folder))
    records = chunks_of(folder)
    with erstwhile.open(floor_target, embedder="hash", background_jobs=False) as m:
        upsert_s, _ = timed(
            lambda: [
                m.upsert(NAMESPACE, records[i : i + BATCH]) for i in range(0, len(records), BATCH)
            ]
        )
    assert isinstance(first, MineReport) and isinstance(again, MineReport)
    assert again.added == again.superseded == again.invalidated == 0, again
    assert (edited.superseded, edited.added, edited.invalidated) == (1, 0, 0), edited
    return {
        "files": first.documents, "chunks": first.chunks, "first_s": first_s,
        "unchanged_s": again_s, "one_edit_s": edit_s, "read_floor_s": read_s,
        "upsert_floor_s": upsert_s,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pg", help="also on PostgreSQL (a URL; each run gets a schema)")
    parser.add_argument("--out", type=Path, default=RESULTS / "mining.json")
    args = parser.parse_args()
    results: dict[str, Any] = {"when": stamp(), "machine": machine(), "backends": {}}
    for backend, pg in (("sqlite", None), ("postgres", args.pg)):
        if backend == "postgres" and pg is None:
            continue
        rounds = []
        for n in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                folder = root / "repo"
                for part in ("src", "docs"):
                    shutil.copytree(REPO / part, folder / part,
                                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
                target, drop = store_target(pg, root, n)
                floor_target, drop_floor = store_target(pg, root, n + 100)
                try:
                    rounds.append(one_round(folder, target, floor_target))
                finally:
                    drop()
                    drop_floor()
            log(f"{backend} round {n + 1}: {rounds[-1]}")
        results["backends"][backend] = summarise(rounds)
    results["machine"]["loadavg_after"] = machine()["loadavg"]
    write_json(args.out, results)
    log(f"wrote {args.out}")


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    files, chunks = rounds[0]["files"], rounds[0]["chunks"]
    first, unchanged = median("first_s"), median("unchanged_s")
    return {
        "files": files,
        "chunks": chunks,
        "repeats": len(rounds),
        "first_mine_s": round(first, 4),
        "first_mine_files_per_s": round(files / first, 1),
        "first_mine_chunks_per_s": round(chunks / first, 1),
        "unchanged_remine_s": round(unchanged, 4),
        "unchanged_remine_files_per_s": round(files / unchanged, 1),
        "one_edit_remine_s": round(median("one_edit_s"), 4),
        "read_floor_s": round(median("read_floor_s"), 4),
        "upsert_floor_s": round(median("upsert_floor_s"), 4),
        "ratio_first_mine_to_upsert_floor": round(first / median("upsert_floor_s"), 2),
        "ratio_unchanged_remine_to_first_mine": round(unchanged / first, 3),
        "ratio_unchanged_remine_to_read_floor": round(unchanged / median("read_floor_s"), 2),
        "rounds": rounds,
    }


if __name__ == "__main__":
    main()

"""What the graph adds to an export and its import, on SQLite.

    python -m bench.export_graph [--notes 5000]

Writes ``--notes`` notes of two facts each among 80 people and 8 tools, extracts
them with the heuristic extractor, rewrites every fifth note and extracts again (so
the graph has retracted mentions and replaced edge versions), then times in one run:
the export (``graph=whole``), an import of the records alone (the export cut to format
1) and an import of the whole export, each into a fresh file, and checks that the
restored store exports the same bytes. Quote the ratios: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

import erstwhile
from erstwhile import backups

FIRST = ("Ada", "Bob", "Cyd", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon")
LAST = ("Stone", "Reed", "Hart", "Lowe", "Marsh", "Nash", "Pike", "Quill")
PEOPLE = [f"{first} {last}" for first in FIRST for last in LAST]
TOOLS = ["Python", "Rust", "Fortran", "COBOL", "Postgres", "SQLite", "Kafka", "Redis"]


def note(rnd: random.Random) -> str:
    return (f"{rnd.choice(PEOPLE)} uses {rnd.choice(TOOLS)}."
            f" {rnd.choice(PEOPLE)} works on {rnd.choice(TOOLS)}.")  # fmt: skip


def timed_import(path: str, target: str) -> float:
    with erstwhile.open(target, embedder="none", background_jobs=False) as m:
        started = time.perf_counter()
        backups.import_export(m, path)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=5000)
    args = parser.parse_args()
    rnd = random.Random(1)
    with tempfile.TemporaryDirectory() as root:
        with erstwhile.open(os.path.join(root, "source.db"), embedder="none",
                            extractor="heuristic", background_jobs=False) as m:  # fmt: skip
            for start in range(0, args.notes, 500):
                m.upsert("b", [{"id": f"n{i:06d}", "content": note(rnd)}
                               for i in range(start, min(args.notes, start + 500))])  # fmt: skip
            m.extract("b")
            m.upsert("b", [{"id": f"n{i:06d}", "content": note(rnd)}
                           for i in range(0, args.notes, 5)])  # fmt: skip
            m.extract("b")
            started = time.perf_counter()
            text = "".join(line + "\n" for line in backups.export_lines(m))
            exported = time.perf_counter() - started
        lines = text.splitlines()
        whole, records = os.path.join(root, "whole.jsonl"), os.path.join(root, "records.jsonl")
        with open(whole, "w", encoding="utf-8") as file:
            file.write(text)
        with open(records, "w", encoding="utf-8") as file:
            file.write('{"format":1,"erstwhile":"export"}\n')
            file.writelines(line + "\n" for line in lines if line.startswith('{"content"'))
        alone = timed_import(records, os.path.join(root, "records.db"))
        restored = os.path.join(root, "whole.db")
        both = timed_import(whole, restored)
        with erstwhile.open(restored, embedder="none", background_jobs=False) as m:
            identical = "".join(line + "\n" for line in backups.export_lines(m)) == text
    counts = {kind: sum(line.startswith(f'{{"{kind}"') for line in lines)
              for kind in ("content", "entity", "mention", "edge", "extracted")}  # fmt: skip
    print(f"lines {len(lines):,}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    print(
        f"export {exported:.2f} s; import of the records alone {alone:.2f} s, with the"
        f" graph {both:.2f} s ({both / alone:.1f}x); byte-identical again: {identical}"
    )


if __name__ == "__main__":
    main()

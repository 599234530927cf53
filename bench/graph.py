"""``python -m bench.graph`` — the knowledge graph's speed: heuristic extraction
throughput, and search with graph expansion against the same search without it.

    python -m bench.graph                       10k notes on SQLite
    python -m bench.graph --pg URL              and on PostgreSQL too
    python -m bench.graph --size 2000 --results /tmp/graph

Data (seed 11): N notes of one to three sentences from three templates ("<person>
works on <project>.", "<project> depends on <tool>.", "<person> uses <tool>."), over
800 people (40 first names x 20 last names), 300 projects and 80 tools with made-up
names. Figures, all measured in the same run:

- the extractor alone (records/s over the texts, no store);
- the extract job end to end (records/s: extraction, resolution, and the writes of
  entities, mentions, edges and markers, one transaction per record);
- search (lexical, top 10, current) with ``expand`` (1 hop, up to 10 appended) and
  without, over the same 200 queries (a person's or project's name): p50/p95 and
  the ratio of the medians, which is what the noisy machine lets us compare.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, latency, log, machine, stamp, write_json

FIRST = [
    "Ada",
    "Alan",
    "Barbara",
    "Claude",
    "Dennis",
    "Donald",
    "Edsger",
    "Frances",
    "Grace",
    "Guido",
    "Hedy",
    "Ivan",
    "Jean",
    "John",
    "Ken",
    "Leslie",
    "Linus",
    "Margaret",
    "Niklaus",
    "Radia",
    "Richard",
    "Shafi",
    "Sophie",
    "Tim",
    "Tony",
    "Vint",
    "Whitfield",
    "Yukihiro",
    "Zelda",
    "Anita",
    "Brian",
    "Carol",
    "Dana",
    "Emil",
    "Fran",
    "Gerald",
    "Hal",
    "Ingrid",
    "Joan",
    "Karl",
]
LAST = [
    "Lovelace",
    "Turing",
    "Liskov",
    "Shannon",
    "Ritchie",
    "Knuth",
    "Dijkstra",
    "Allen",
    "Hopper",
    "Rossum",
    "Lamarr",
    "Sutherland",
    "Sammet",
    "Backus",
    "Thompson",
    "Lamport",
    "Torvalds",
    "Hamilton",
    "Wirth",
    "Perlman",
]
SEED = 11
QUERIES = 200


def made_up(rng: np.random.Generator, count: int, syllables: int) -> list[str]:
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    names: dict[str, None] = {}
    while len(names) < count:
        word = "".join(
            rng.choice(list(consonants)) + rng.choice(list(vowels)) for _ in range(syllables)
        )
        names[word.capitalize()] = None
    return list(names)


def corpus(size: int) -> tuple[list[str], list[str]]:
    """The notes and the query words (names that occur in them)."""
    rng = np.random.default_rng(SEED)
    people = [f"{first} {last}" for first in FIRST for last in LAST]
    projects = made_up(rng, 300, 3)
    tools = made_up(rng, 80, 2)
    notes = []
    for _ in range(size):
        person, project = rng.choice(people), rng.choice(projects)
        tool = rng.choice(tools)
        sentences = [
            f"{person} works on {project}.",
            f"{project} depends on {tool}.",
            f"{person} uses {tool}.",
        ]
        notes.append(" ".join(sentences[: int(rng.integers(1, 4))]))
    queries = [
        str(rng.choice(projects)) if i % 2 else str(rng.choice(people)).split()[1]
        for i in range(QUERIES)
    ]
    return notes, queries


def measure(target: str, notes: list[str], queries: list[str]) -> dict[str, Any]:
    import erstwhile

    with erstwhile.open(target, embedder="none", extractor="heuristic", background_jobs=False) as m:
        for start in range(0, len(notes), 1000):
            m.upsert("bench", [{"content": text} for text in notes[start : start + 1000]])
        started = time.perf_counter()
        report = m.extract("bench")
        job_seconds = time.perf_counter() - started
        assert report.extracted == len(notes), report
        timings: dict[str, list[float]] = {"plain": [], "expand": []}
        appended = []
        for query in queries[:20]:  # warm both paths
            m.search("bench", query, ranking="lexical")
            m.search("bench", query, ranking="lexical", expand=True)
        for query in queries:
            for case, expand in (("plain", False), ("expand", True)):
                t0 = time.perf_counter()
                result = m.search("bench", query, ranking="lexical", expand=expand)
                timings[case].append(time.perf_counter() - t0)
                if expand:
                    appended.append(sum(1 for h in result.hits if "graph" in h.signals))
        graph = m.service.store.graph
        sizes = {
            "entities": len(graph.known("bench")),
            "edges": len(graph.relationships("bench", None, None)),
        }
    plain, expanded = latency(timings["plain"]), latency(timings["expand"])
    return {
        "extract_job_records_per_s": round(len(notes) / job_seconds, 1),
        "graph": sizes,
        "search_plain": plain,
        "search_expand": expanded,
        "expand_over_plain_p50": round(expanded["p50_ms"] / plain["p50_ms"], 2),
        "appended_mean": round(float(np.mean(appended)), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--pg", help="a PostgreSQL URL: measure that backend too")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from erstwhile.extraction import HeuristicExtractor

    notes, queries = corpus(args.size)
    extractor = HeuristicExtractor()
    started = time.perf_counter()
    for text in notes:
        extractor.extract(text)
    alone = len(notes) / (time.perf_counter() - started)
    log(f"heuristic extractor alone: {alone:,.0f} records/s")
    out: dict[str, Any] = {
        "at": stamp(),
        "machine": machine(),
        "size": args.size,
        "extractor_alone_records_per_s": round(alone, 1),
        "backends": {},
    }
    with tempfile.TemporaryDirectory() as directory:
        out["backends"]["sqlite"] = measure(str(Path(directory) / "graph.db"), notes, queries)
        log(f"sqlite: {out['backends']['sqlite']}")
    if args.pg:
        from erstwhile.store.postgres.connection import connect, with_schema

        schema = f"bench_graph_{os.getpid()}"
        with connect(args.pg) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            out["backends"]["postgres"] = measure(with_schema(args.pg, schema), notes, queries)
            log(f"postgres: {out['backends']['postgres']}")
        finally:
            with connect(args.pg) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    label = f"{args.size // 1000}k" if args.size % 1000 == 0 else str(args.size)
    write_json(args.results / f"graph_{label}.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

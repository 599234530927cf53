"""A kill -9 in the middle of an extract job, then a re-run: the graph equals a clean
run's (same entities, mentions and edge ids), and no record changed by a byte."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.support.pg import fresh_target

import erstwhile

FIRST = ["Ada", "Grace", "Linus", "Barbara", "Edsger", "Donald", "Frances", "Ken", "Radia"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Knuth", "Allen", "Thompson"]
PROJECTS = ["Apollo", "Zephyr", "Quasar", "Nimbus", "Orchid", "Tundra", "Mosaic"]
TOOLS = ["Redis", "Kafka", "Postgres", "Nginx", "Docker"]


def records() -> list[dict[str, Any]]:
    out = []
    for i in range(90):
        person = f"{FIRST[i % len(FIRST)]} {LAST[(i * 5) % len(LAST)]}"
        project, tool = PROJECTS[i % len(PROJECTS)], TOOLS[(i * 3) % len(TOOLS)]
        text = f"{person} works on {project}. {project} depends on {tool}."
        out.append({"id": f"r{i:03d}", "content": text, "payload": bytes([i]),
                    "tags": ["t"], "valid_from": f"2024-01-{1 + i % 28:02d}"})  # fmt: skip
    return out


WORKER = textwrap.dedent(
    """
    import sys, time
    import erstwhile
    from erstwhile.extraction import HeuristicExtractor

    class Slow(HeuristicExtractor):
        def _extract(self, text):
            with open(sys.argv[2], "a") as log:
                log.write(text[:4] + "\\n")
            time.sleep(0.03)
            return super()._extract(text)

    m = erstwhile.open(sys.argv[1], embedder="none", extractor=Slow(), background_jobs=False)
    m.extract("ns")
    """
)


def stored(m: erstwhile.Memory) -> list[Any]:
    """Every stored field of every version of every record, payload bytes included."""
    out = []
    for record in records():
        for version in m.service.store.versions("ns", record["id"]):
            got = m.get("ns", record["id"], version)
            out.append((got.model_dump(mode="json"), got.payload))
    return out


def graph_state(m: erstwhile.Memory) -> dict[str, Any]:
    g = m.service.store.graph
    entities = g.known("ns")
    edges = []
    for edge in g.relationships("ns", None, None):
        provenance = dict(edge.provenance or {})
        provenance.pop("job", None)  # which job read it is the one thing that differs
        edges.append((edge.id, edge.subject, edge.predicate, edge.object, edge.valid_from,
                      edge.valid_to, edge.confidence, provenance))  # fmt: skip
    return {
        "entities": sorted(entities, key=lambda e: e.id),
        "mentions": sorted((x.record, x.entity, x.spelling) for x in g.mentions("ns")),
        "edges": sorted(edges),
        "same_as": sorted((e.id, tuple(g.same_as("ns", e.id))) for e in entities),
    }


def test_a_killed_extract_job_replays_to_the_clean_graph(store_target: str, tmp_path: Path) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.upsert("ns", records())
        before = stored(m)
    log = tmp_path / "read.txt"
    log.touch()
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    process = subprocess.Popen([sys.executable, str(worker), store_target, str(log)])
    deadline = time.monotonic() + 60
    while len(log.read_text().splitlines()) < 25:
        assert process.poll() is None, "the worker ended before it could be killed"
        assert time.monotonic() < deadline, "the worker read nothing"
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    with erstwhile.open(store_target, embedder="none", extractor="heuristic",
                        background_jobs=False) as m:  # fmt: skip
        (killed,) = m.service.jobs("ns")
        assert killed["state"] == "interrupted"
        left = m.service.audit("ns")["extraction_backlog"]
        assert 0 < left < len(records())  # the kill landed mid-way
        report = m.extract("ns")
        assert (report.extracted, report.remaining) == (left, 0)
        assert m.extract("ns").extracted == 0
        replayed = graph_state(m)
        assert stored(m) == before  # extraction never wrote a record

    clean_target, cleanup = fresh_target("postgres" if "://" in store_target else "sqlite")
    try:
        with erstwhile.open(clean_target, embedder="none", extractor="heuristic",
                            background_jobs=False) as clean:  # fmt: skip
            clean.upsert("ns", records())
            clean.extract("ns")
            expected = graph_state(clean)
    finally:
        cleanup()
    assert replayed == expected
    assert len(expected["edges"]) > 90 and len(expected["entities"]) > 20

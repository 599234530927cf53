"""The extract job: reads current notes and mined records into the knowledge graph.

It first *sweeps*: open facts extracted from a record that has since been superseded
or invalidated are closed at the instant the record stopped being current. Then it
reads, oldest first, every current record of kind ``note`` or with an ``origin`` that
has no extraction marker for its content, and writes, per record and in one
transaction, the entities, mentions and edges found and then the marker. Edge and
entity ids are derived from the evidence, so a crash anywhere replays harmlessly and
a re-run finds nothing to do. It never writes a record. A provider failure fails the
job, visibly; the records it did not reach are read by the next one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from erstwhile.domain.errors import ErstwhileError, ProviderFailed
from erstwhile.domain.time import now_us
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.resolution import Resolver, plan
from erstwhile.jobs.embed import Progress, this_process
from erstwhile.store.base import Store
from erstwhile.store.sql.graph import Pending

log = logging.getLogger("erstwhile.jobs")

BATCH = 32


@dataclass(frozen=True)
class ExtractReport:
    job_id: int
    namespace: str
    extractor_id: str
    extracted: int  # records read into the graph
    closed: int  # facts closed by the sweep
    remaining: int


def _provenance(pending: Pending, job_id: int, extractor_id: str) -> dict[str, object]:
    provenance: dict[str, object] = {"record": pending.id, "job": job_id,
                                     "extractor": extractor_id}  # fmt: skip
    if pending.origin is not None:
        provenance["origin"] = pending.origin
    return provenance


def run_extract_job(
    store: Store,
    namespace: str,
    extractor: Extractor,
    *,
    min_confidence: float,
    progress: Progress | None = None,
    clock: Callable[[], int] = now_us,
) -> ExtractReport:
    """One extract job; ``clock`` is the record time of what it writes."""
    graph = store.graph
    job_id = store.job_start("extract", namespace, clock(), this_process())
    done = 0
    closed = 0
    try:
        closed = graph.sweep(namespace, clock())
        total = graph.backlog_count(namespace, clock())
        resolver = Resolver(namespace, graph.known(namespace))
        while pending := graph.backlog(namespace, clock(), BATCH):
            for item in pending:
                found = extractor.extract(item.content, min_confidence=min_confidence)
                now = clock()
                change = plan(
                    resolver, found, record_id=item.id,
                    evidence=f"{item.id}\x1f{item.content_hash}",
                    valid_from=min(item.valid_from, now),
                    provenance=_provenance(item, job_id, extractor.extractor_id),
                )  # fmt: skip
                if graph.apply(namespace, change, now=now,
                               extracted=(item, extractor.extractor_id)):  # fmt: skip
                    done += 1
                else:  # rewritten meanwhile: what was resolved for it was not written
                    resolver = Resolver(namespace, graph.known(namespace))
            store.job_update(job_id, state="running", done=done, error=None, now=clock())
            if progress is not None:
                progress(done, max(total, done))
        closed += graph.sweep(namespace, clock())  # records superseded while the job ran
    except ErstwhileError as error:
        store.job_update(job_id, state="failed", done=done, error=error.message, now=clock())
        log.warning("extract job %s for %s failed: %s", job_id, namespace, error.message)
        if isinstance(error, ProviderFailed):
            raise
        raise ProviderFailed(error.message) from None
    store.job_update(job_id, state="done", done=done, error=None, now=clock())
    remaining = graph.backlog_count(namespace, clock())
    return ExtractReport(job_id, namespace, extractor.extractor_id, done, closed, remaining)

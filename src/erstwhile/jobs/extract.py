"""The extract job: reads current notes and mined records into the knowledge graph.

It first *sweeps*: open facts extracted from a record that has since been superseded
or invalidated are closed at the instant the record stopped being current. Then it
reads, oldest first, every current record of kind ``note`` or with an ``origin`` that
has no extraction marker for its content, and writes, per record and in one
transaction, the entities, mentions and edges found and then the marker. Edge and
entity ids are derived from the evidence, so a crash anywhere replays harmlessly and
a re-run finds nothing to do. It never writes a record. A provider failure fails the
job, visibly; the records it did not reach are read by the next one.

The job counts what its provider spends (:class:`~erstwhile.extraction.usage.Usage`,
kept on its row as it goes) and keeps to its :class:`~erstwhile.extraction.usage.Budget`:
before each record it asks whether one more call is allowed, and when not it stops
there — ``done``, ``stopped`` saying which limit was reached — with every record it
read committed and the rest left, unmarked, to the next extract job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from erstwhile.domain.errors import ErstwhileError, ProviderFailed
from erstwhile.domain.time import now_us
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.resolution import Resolver, plan
from erstwhile.extraction.usage import Budget, Usage
from erstwhile.jobs.embed import Progress, this_process
from erstwhile.jobs.rows import JobCrashed, job_row
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
    #: provider figures (:meth:`~erstwhile.extraction.usage.Usage.to_json`)
    usage: dict[str, object] | None = None
    #: why it stopped with records left (its budget), or None
    stopped: str | None = None


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
    lock: threading.Lock | None = None,
    stop: threading.Event | None = None,
    budget: Budget | None = None,
) -> ExtractReport:
    """One extract job; ``clock`` is the record time of what it writes. Its row always
    ends (:func:`~erstwhile.jobs.rows.job_row`); ``lock``: held while it works;
    ``stop``: when set, it ends ``interrupted`` before the next record; ``budget``:
    it ends ``done``, ``stopped`` saying why, before a call past it."""
    graph = store.graph
    budget = budget or Budget()
    usage = Usage()
    closed = 0
    try:
        with job_row(store, "extract", namespace, this_process(), clock=clock, lock=lock,
                     stop=stop) as row:  # fmt: skip
            row.usage = usage
            closed = graph.sweep(namespace, clock())
            total = graph.backlog_count(namespace, clock())
            resolver = Resolver(namespace, graph.known(namespace))
            while not row.stopped and (pending := graph.backlog(namespace, clock(), BATCH)):
                for item in pending:
                    row.check()
                    if (reached := budget.over(usage)) is not None:
                        row.stopped = f"budget: {reached}; the next extract job carries on"
                        break
                    found = extractor.extract(item.content, min_confidence=min_confidence,
                                              usage=usage)  # fmt: skip
                    now = clock()
                    change = plan(
                        resolver, found, record_id=item.id,
                        evidence=f"{item.id}\x1f{item.content_hash}",
                        valid_from=min(item.valid_from, now),
                        provenance=_provenance(item, row.id, extractor.extractor_id),
                    )  # fmt: skip
                    if graph.apply(namespace, change, now=now,
                                   extracted=(item, extractor.extractor_id)):  # fmt: skip
                        row.done += 1
                    else:  # rewritten meanwhile: what was resolved for it was not written
                        resolver = Resolver(namespace, graph.known(namespace))
                row.update(row.done)
                if progress is not None:
                    progress(row.done, max(total, row.done))
            closed += graph.sweep(namespace, clock())  # records superseded while it ran
    except ErstwhileError as error:
        log.warning("extract job for %s failed: %s", namespace, error.message)
        if isinstance(error, ProviderFailed | JobCrashed):
            raise
        raise ProviderFailed(error.message) from None
    remaining = graph.backlog_count(namespace, clock())
    return ExtractReport(row.id, namespace, extractor.extractor_id, row.done, closed, remaining,
                         usage.to_json(), row.stopped)  # fmt: skip

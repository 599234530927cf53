"""The embed job: fills a namespace's missing vectors for its current embedder.

It reads records with no vector for the embedder in batches, embeds them (a record
that names a conversation or session with the record before it, as every write path
does: :mod:`erstwhile.service_context`) and stores the vectors, each batch in its own
transaction — so a pause, a crash or a re-run loses nothing and embeds nothing twice.
A provider failure fails the job, visibly (the job row says ``failed`` with the error)
and raises.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from erstwhile.domain.errors import ErstwhileError, ProviderFailed
from erstwhile.domain.time import now_us
from erstwhile.embedding.base import Embedder
from erstwhile.jobs.rows import JobCrashed, Stop, job_row
from erstwhile.service_context import embed_in_context
from erstwhile.store.base import Store

log = logging.getLogger("erstwhile.jobs")

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class JobReport:
    job_id: int
    namespace: str
    embedder_id: str
    embedded: int
    remaining: int


class NamespaceLocks:
    """One lock per namespace, so a namespace's backlog is worked by one job at a time."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, namespace: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(namespace, threading.Lock())


def this_process() -> str:
    """The owner a job row records: "host:pid" (computed per call: a fork changes it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_gone(owner: str) -> bool:
    """Whether ``owner`` names a process of this host that no longer exists. A process
    on another host, or an owner that can't be read, is never presumed gone."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, owned by another user
    return False


def mark_interrupted(store: Store) -> list[int]:
    """Marks ``interrupted`` every job still ``running`` whose process on this host has
    ended (killed, crashed, powered off). Their work is not lost: the database is the
    cursor, and the next job carries on from it. Returns the ids marked."""
    marked = []
    for job in store.jobs(state="running"):
        if job["owner"] and _process_gone(job["owner"]):
            follower = "embed" if job["type"] == "reindex" else job["type"]
            store.job_update(
                job["id"],
                state="interrupted",
                done=job["done"],
                error=f"interrupted: its process ({job['owner']}) ended before it finished;"
                f" the next {follower} job carries on where it stopped",
                now=now_us(),
            )
            marked.append(job["id"])
    return marked


def run_embed_job(
    store: Store,
    namespace: str,
    embedder: Embedder,
    *,
    job_type: str = "embed",
    progress: Progress | None = None,
    lock: threading.Lock | None = None,
    stop: threading.Event | None = None,
) -> JobReport:
    """One embed (or, ``job_type="reindex"``, reindex: the vectors dropped first) job;
    its row always ends (:func:`~erstwhile.jobs.rows.job_row`). ``lock``: held while it
    works; ``stop``: when set, it ends ``interrupted`` after the batch at hand."""
    batch = max(embedder.batch_size, 1)  # one provider call per transaction: progress is durable
    try:
        with job_row(store, job_type, namespace, this_process(), lock=lock, stop=stop) as row:
            if job_type == "reindex":
                store.clear_vectors(namespace, embedder.embedder_id)
            total = store.backlog_count(namespace, embedder.embedder_id)
            while pending := store.backlog(namespace, embedder.embedder_id, batch):
                vectors = embed_pending(store, namespace, embedder, pending)
                done = row.done + store.store_vectors(
                    namespace,
                    embedder.embedder_id,
                    [(rowid, digest, vectors[i]) for i, (rowid, digest, _) in enumerate(pending)],
                )
                row.update(done)
                if progress is not None:
                    progress(done, max(total, done))
    except ErstwhileError as error:
        log.warning("%s job for %s failed: %s", job_type, namespace, error.message)
        if isinstance(error, ProviderFailed | JobCrashed):
            raise
        raise ProviderFailed(error.message) from None
    remaining = store.backlog_count(namespace, embedder.embedder_id)
    return JobReport(row.id, namespace, embedder.embedder_id, row.done, remaining)


def embed_pending(
    store: Store, namespace: str, embedder: Embedder, pending: list[tuple[int, str, str]]
) -> np.ndarray:
    """The vectors of a backlog batch ``(rowid, hash, content)``: a record that names a
    conversation or session embedded with the record before it, as when it was written
    (:mod:`erstwhile.service_context`)."""
    places = store.places(namespace, [rowid for rowid, _, _ in pending])
    befores: list[str | None] = []
    for rowid, _, _ in pending:
        place = places.get(rowid)
        found = store.before(namespace, place) if place is not None else None
        befores.append(found[1] if found is not None else None)
    return embed_in_context(embedder, [content for _, _, content in pending], befores)


class BackgroundEmbedder:
    """Works queued namespaces on one daemon thread; a namespace queued while it
    already waits is coalesced into the waiting job."""

    def __init__(self, work: Callable[[str], object]) -> None:
        self._work = work
        self._waiting: list[str] = []
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="erstwhile-embed", daemon=True)
        self._thread.start()

    def schedule(self, namespace: str) -> None:
        with self._cond:
            if namespace not in self._waiting and not self._stopped:
                self._waiting.append(namespace)
                self._cond.notify()

    def idle(self, timeout: float = 60.0) -> bool:
        """Waits until nothing is queued or running; True if it got there."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._waiting and not self._busy, timeout)

    _busy = False

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._stopped)
                if self._stopped:
                    return
                namespace = self._waiting.pop(0)
                self._busy = True
            try:
                self._work(namespace)
            except (ErstwhileError, Stop):
                pass  # recorded on the job row and logged by the job itself
            except Exception:  # a background thread must not die silently
                log.exception("background embed job for %s crashed", namespace)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def stop(self, timeout: float = 30.0) -> None:
        """Drops what waits and waits up to ``timeout`` seconds for the job at hand
        (its ``stop`` signal, set by the caller, ends it at its next step)."""
        with self._cond:
            self._stopped = True
            self._waiting.clear()
            self._cond.notify_all()
        self._thread.join(timeout=timeout)

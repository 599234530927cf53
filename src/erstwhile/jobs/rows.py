"""A job's row, from start to an end it always reaches (:func:`job_row`).

Every job (embed, reindex, extract, mine) runs inside :func:`job_row`, which opens its
row (``running``) and closes it whatever happens:

- the job returns: ``done``;
- it raises an :class:`~erstwhile.domain.errors.ErstwhileError`: ``failed``, with the
  error's message, and the error goes on up;
- it raises any other ``Exception`` — a bug, or the interpreter giving up on an input
  (``RecursionError``, ``MemoryError``, ``OverflowError``): ``failed``, with the
  exception's type and text, logged with its traceback, and raised on as
  :class:`JobCrashed` (a stable code instead of a raw traceback);
- it is told to stop (:class:`Stop`, at the next step of its work) or the process is
  ending (``KeyboardInterrupt``, ``SystemExit``, any other ``BaseException``):
  ``interrupted``, saying the next job of its type carries on, and it goes on up.

Writing that last state can itself fail (the database went away): it is logged, and
the row stays ``running`` until the process has ended, when the next open marks it
``interrupted`` (:func:`~erstwhile.jobs.embed.mark_interrupted`). Nothing else can
leave a row ``running``.

A job may have to wait for another of its namespace (``lock``): its row is opened
first, so whoever started it has the id at once, and the wait gives way to ``stop``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from erstwhile.domain.errors import ErstwhileError, StorageUnavailable
from erstwhile.domain.time import now_us
from erstwhile.extraction.usage import Usage
from erstwhile.store.base import Store

log = logging.getLogger("erstwhile.jobs")

#: The most characters of an error a job row keeps.
MAX_ERROR_CHARS = 2000
_WAIT_STEP = 0.1  # seconds between looks at ``stop`` while waiting for the lock


class JobCrashed(ErstwhileError):
    """A job failed on something erstwhile did not foresee; its row says what."""

    code = "erstwhile.internal"


class Stop(Exception):
    """Raised inside a job asked to stop (:meth:`JobRow.check`): it ends ``interrupted``."""


def _storable(text: str) -> str:
    """An error's text as a row can hold it: valid UTF-8, bounded."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class JobRow:
    """An open job row: ``id``, the work ``done`` so far, and the stop signal; a job
    that counts what its provider spends sets ``usage`` (written with each update and
    at the end), and one that ends early on purpose says why in ``stopped``."""

    def __init__(
        self,
        store: Store,
        job_id: int,
        clock: Callable[[], int],
        stop: threading.Event | None,
    ) -> None:
        self.store = store
        self.id = job_id
        self.done = 0
        self.clock = clock
        self.stop = stop
        self.usage: Usage | None = None
        self.stopped: str | None = None

    def _figures(self) -> dict[str, Any] | None:
        return None if self.usage is None else self.usage.to_json()

    def check(self) -> None:
        """Raises :class:`Stop` when the job has been asked to stop."""
        if self.stop is not None and self.stop.is_set():
            raise Stop

    def update(self, done: int) -> None:
        """Records progress (a step of the work): ``done``, still ``running``."""
        self.done = done
        self.store.job_update(self.id, state="running", done=done, error=None, now=self.clock(),
                              usage=self._figures())  # fmt: skip
        self.check()

    def close(self, state: str, error: str | None) -> None:
        try:
            self.store.job_update(
                self.id, state=state, done=self.done,
                error=None if error is None else _storable(error), now=self.clock(),
                usage=self._figures(), stopped=self.stopped,
            )  # fmt: skip
        except BaseException:  # the row cannot be written: the next open marks it
            log.exception("job %s: its end (%s) could not be recorded", self.id, state)


def _wait(lock: threading.Lock, stop: threading.Event | None) -> None:
    while not lock.acquire(timeout=_WAIT_STEP):
        if stop is not None and stop.is_set():
            raise Stop


@contextmanager
def job_row(
    store: Store,
    job_type: str,
    namespace: str,
    owner: str,
    *,
    clock: Callable[[], int] = now_us,
    lock: threading.Lock | None = None,
    stop: threading.Event | None = None,
) -> Iterator[JobRow]:
    """Runs the block as one job: its row opened now, closed as the module says."""
    row = JobRow(store, store.job_start(job_type, namespace, clock(), owner), clock, stop)
    follower = "embed" if job_type == "reindex" else job_type
    locked = False
    try:
        if lock is not None:
            _wait(lock, stop)
            locked = True
        row.check()
        yield row
    except ErstwhileError as error:
        row.close("failed", error.message)
        raise
    except Stop:
        row.close("interrupted", f"interrupted: the process was asked to stop; the next "
                                 f"{follower} job carries on where it stopped")  # fmt: skip
        raise
    except Exception as error:
        text = f"{type(error).__name__}: {error}"
        log.exception("%s job %s for %s crashed", job_type, row.id, namespace)
        row.close("failed", text)
        raise JobCrashed(
            f"the {job_type} job {row.id} failed on something unforeseen ({_storable(text)}); "
            "its job row records it, and the log has the details"
        ) from error
    except BaseException as error:
        name = type(error).__name__
        row.close("interrupted", f"interrupted ({name}) before it finished; the next "
                                 f"{follower} job carries on where it stopped")  # fmt: skip
        raise
    else:
        row.close("done", None)
    finally:
        if locked:
            assert lock is not None
            lock.release()


class JobThreads:
    """The threads of the jobs a process started on request, and the ``stop`` signal
    every job it runs shares: :meth:`stop_all` sets it and waits for them."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._changed = threading.Condition()

    def start(self, work: Callable[[], None], name: str) -> None:
        """Runs ``work`` on a daemon thread; refused once stopping."""

        def run() -> None:
            try:
                work()
            finally:
                with self._changed:
                    self._threads.discard(threading.current_thread())
                    self._changed.notify_all()

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._changed:
            if self.stop.is_set():
                raise StorageUnavailable("the service is stopping; it starts no more jobs")
            self._threads.add(thread)
        thread.start()

    def stop_all(self, timeout: float) -> bool:
        """Sets ``stop`` and waits up to ``timeout`` seconds for the threads to end;
        whether they did."""
        self.stop.set()
        with self._changed:
            return self._changed.wait_for(lambda: not self._threads, timeout)

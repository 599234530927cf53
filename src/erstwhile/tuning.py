"""``erstwhile.tune_process()``: the process-wide settings that speed erstwhile's
writes, for a process that is erstwhile's own (the CLI and the server call it first).

:func:`erstwhile.open` changes nothing of its host process: an application that embeds
a store (a web app, an agent framework) keeps Python's garbage collector and SQLite's
process-wide configuration as it set them. A process that runs erstwhile and little
else can allow two changes that matter to a bulk ingest:

- Python's cyclic garbage collector paused while a write batch is built
  (:mod:`erstwhile.gc_pause`), in every thread of the process, since the collector is
  the process's;
- SQLite's memory statistics off (:mod:`erstwhile.store.sqlite.library`), if nothing of
  SQLite's is alive yet in the process: call it before opening any database.
"""

from __future__ import annotations

from dataclasses import dataclass

from erstwhile.gc_pause import allow_pauses
from erstwhile.store.sqlite.library import memory_statistics_off, turned_off


@dataclass(frozen=True)
class ProcessTuning:
    """What :func:`tune_process` has set in this process."""

    #: the cyclic collector is paused while a write batch is built
    gc_paused_in_batches: bool
    #: SQLite's memory statistics are off (False where SQLite was already in use, or
    #: off already, or the library was out of reach: anywhere but Linux)
    sqlite_memory_statistics_off: bool


def tune_process() -> ProcessTuning:
    """Allows erstwhile the process-wide settings above, from now on; calling it again
    changes nothing more. Returns what is set."""
    allow_pauses()
    memory_statistics_off()
    return ProcessTuning(gc_paused_in_batches=True, sqlite_memory_statistics_off=turned_off())

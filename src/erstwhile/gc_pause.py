"""Pausing Python's cyclic garbage collector while a write batch is built, in a process
that asked for it (:func:`erstwhile.tune_process`; the CLI and the server do).

A batch of 1,000 records allocates tens of thousands of short-lived containers (dicts,
tuples, lists); each 700 of them start a collection that walks every young object, and
every tenth of those a wider one, for garbage there is none of (nothing in a batch is
cyclic). Reference counting still frees everything at once; only the cycle detector
waits until the outermost batch in any thread ends.

The collector is the whole process's: an application that embeds erstwhile (a web app,
an agent framework) would see it off in all its threads while any of them writes a
batch. So :func:`gc_paused` changes nothing until :func:`allow_pauses` was called.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_allowed = False


def allow_pauses() -> None:
    """From now on, :func:`gc_paused` pauses the collector (for the whole process)."""
    global _allowed
    _allowed = True


def pauses_allowed() -> bool:
    return _allowed


@contextmanager
def gc_paused() -> Iterator[None]:
    """Where pauses are allowed, the collector off inside (nested and concurrent batches
    share one pause), and back as it was once the last of them ends, however it ends;
    elsewhere, nothing."""
    global _depth, _was_enabled
    if not _allowed:
        yield
        return
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()

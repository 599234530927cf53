"""The SQLite library's one process-wide setting that erstwhile can make, in a process
that asks for it (:func:`erstwhile.tune_process`; the CLI and the server do): its memory
statistics off. :func:`erstwhile.open` leaves SQLite as the host process set it.

SQLite counts every allocation it makes (``SQLITE_CONFIG_MEMSTATUS``, on by default)
under one mutex of the whole process, so two threads working in SQLite at once take
turns at it for each allocation: a writer beside the lexical merge, which allocates for
each of the ~100k postings it makes, blocked on it ~240 times a batch and took 64-67 ms
a batch instead of 50-54 (a 100k ingest, :mod:`bench.ingest`); searches of a server's
threads meet the same. erstwhile reads no statistic of SQLite's, and SQLite needs them
only for the heap limits (``PRAGMA soft_heap_limit``, ``hard_heap_limit``), which it
sets none of.

The setting can change only while SQLite holds nothing (shut down, set, initialized
again), and it is the process's, not a connection's: so it is made once, when the
process asks before it opens any database, and only where that disturbs no one.
Nothing of SQLite's may be alive: its memory in use is 0 with the statistics on (a
probe connection shows that they are, and that the library the ``sqlite3`` module
runs is the one reached here). The last check and the change run as calls that keep
Python's lock (``ctypes.PyDLL``) with the interpreter's switch interval raised
meanwhile, so no other Python thread can open a database in between. Only on Linux,
where a variadic C function is called as ctypes calls any; anywhere else SQLite stays
as it was.
"""

from __future__ import annotations

import ctypes
import sqlite3
import sys
import threading

#: ``sqlite3_config`` option: whether to count allocations (sqlite3.h).
_CONFIG_MEMSTATUS = 9
_SQLITE_OK = 0
#: Seconds between the interpreter's thread switches while the setting changes: longer
#: than the change takes (microseconds), so none comes in between.
_HELD_S = 60.0

_lock = threading.Lock()
_tried = False
_off = False


def _library() -> ctypes.PyDLL | None:
    """The SQLite library of the ``sqlite3`` module (its extension module's own symbols,
    or those of the library it links), called without releasing Python's lock."""
    import _sqlite3

    try:
        library = ctypes.PyDLL(_sqlite3.__file__)
        for name in ("sqlite3_memory_used", "sqlite3_shutdown", "sqlite3_config",
                     "sqlite3_initialize"):  # fmt: skip
            getattr(library, name)
    except (OSError, AttributeError):
        return None
    library.sqlite3_memory_used.restype = ctypes.c_int64
    library.sqlite3_memory_used.argtypes = []
    return library


def memory_statistics_off() -> bool:
    """Turns SQLite's memory statistics off for the process, the first time it is
    called, where that disturbs no one (the module's docstring); whether they were
    turned off by this call."""
    global _tried, _off
    with _lock:
        if _tried:
            return False
        _tried = True
        library = _library() if sys.platform == "linux" else None
        if library is None or library.sqlite3_memory_used() != 0:
            return False  # not reachable, or something of SQLite's is alive
        probe = sqlite3.connect(":memory:")
        counted = library.sqlite3_memory_used() > 0
        probe.close()
        if not counted:
            return False  # statistics off already, or another copy of the library
        interval = sys.getswitchinterval()
        sys.setswitchinterval(_HELD_S)
        try:
            if library.sqlite3_memory_used() != 0 or library.sqlite3_shutdown() != _SQLITE_OK:
                return False
            done = library.sqlite3_config(_CONFIG_MEMSTATUS, ctypes.c_int(0)) == _SQLITE_OK
            library.sqlite3_initialize()
        finally:
            sys.setswitchinterval(interval)
        _off = done
        return done


def turned_off() -> bool:
    """Whether :func:`memory_statistics_off` turned the statistics off in this process."""
    return _off

"""The store's own threads (its checkpointer, its merger), seen from a test."""

from __future__ import annotations

import threading
import time


def alive(name: str) -> int:
    """How many live threads of this process are named ``name``."""
    return sum(t.name == name and t.is_alive() for t in threading.enumerate())


def wait_until_at_most(name: str, count: int, timeout: float = 10.0) -> int:
    """Waits (at most ``timeout`` seconds) until no more than ``count`` threads named
    ``name`` live: a thread asked to end finishes its task first. Returns how many do."""
    deadline = time.monotonic() + timeout
    while alive(name) > count and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive(name)

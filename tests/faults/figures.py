"""The fault suite's figures: counters every fault test adds to, printed at the end
of the pytest run (``conftest.pytest_terminal_summary``) so CI logs carry them."""

from __future__ import annotations

import threading
from collections import Counter

#: The figures the suite always reports, in this order, even when zero.
HEADLINE = ("trials", "acknowledged writes", "lost", "partial", "forked", "5xx")


class Figures:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counts[name] += amount

    def lines(self) -> list[str]:
        names = [*HEADLINE, *sorted(set(self.counts) - set(HEADLINE))]
        return [f"{name}: {self.counts[name]}" for name in names]


FIGURES = Figures()

"""The engines of the speed benchmark: one module each, one small interface.

An engine ingests a :class:`~bench.synth.SpeedData` and answers a :class:`Query` with
record indices, best first. ``supports`` names the cases it can answer; a case it
cannot answer is reported as "—", never approximated by something else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.synth import AS_OF_US, NOW_US, SpeedData

CASES = ("semantic", "semantic_filtered", "lexical", "hybrid_filtered", "semantic_as_of")
CASE_TITLES = {
    "semantic": "(a) semantic, unfiltered",
    "semantic_filtered": "(b) semantic, room AND currently valid",
    "lexical": "(c) lexical (BM25), unfiltered",
    "hybrid_filtered": "(d) hybrid, room AND currently valid",
    "semantic_as_of": "(e) semantic, as of a past instant",
}


@dataclass(frozen=True)
class Query:
    case: str
    index: int
    vector: np.ndarray
    text: str
    room: str | None  # None = any room
    at_us: int | None  # the validity instant; None = no validity clause at all


class Engine(ABC):
    """Base class: subclasses set ``name`` and implement ``ingest`` and ``search``
    (and ``close`` when they hold files or connections)."""

    name = "engine"
    cases: tuple[str, ...] = CASES
    notes: list[str]

    def __init__(self) -> None:
        self.notes = []

    def supports(self, case: str) -> bool:
        return case in self.cases

    @abstractmethod
    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        """Loads everything; returns extra timings (e.g. index builds, in seconds)."""

    @abstractmethod
    def search(self, query: Query) -> list[int]:
        """The record indices that answer ``query``, best first."""

    def close(self) -> None:  # noqa: B027 - optional: most engines hold nothing to release
        """Releases files and connections."""


# Here, not in bench.speed, so that bench.abba can drive an older tree whose package
# lacks what the speed bench's truth imports.
def case_queries(data: SpeedData, table: dict[str, np.ndarray]) -> dict[str, list[Query]]:
    q = data.queries
    out: dict[str, list[Query]] = {case: [] for case in CASES}
    for j in range(len(q.texts)):
        vector = q.vectors[j]
        hybrid_vector = table[q.texts[j]]  # a repeated text maps to one vector
        out["semantic"].append(Query("semantic", j, vector, q.texts[j], None, None))
        out["semantic_filtered"].append(
            Query("semantic_filtered", j, vector, q.texts[j], q.rooms[j], NOW_US)
        )
        out["lexical"].append(Query("lexical", j, vector, q.texts[j], None, None))
        out["hybrid_filtered"].append(
            Query("hybrid_filtered", j, hybrid_vector, q.texts[j], q.rooms[j], NOW_US)
        )
        out["semantic_as_of"].append(Query("semantic_as_of", j, vector, q.texts[j], None, AS_OF_US))
    return out

"""The floor: numpy, exact, over just the in-scope rows — whose indices it is handed.

No storage, no parsing, no filtering cost: the scope is precomputed outside the timer.
It is what the ranking itself costs in float32 on this machine, the number every
engine is measured against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.engines import Engine, Query
from bench.synth import SpeedData
from bench.truth import Bm25, floor_hybrid, floor_lexical, floor_semantic


class FloorEngine(Engine):
    name = "floor (numpy, in-scope rows)"

    def __init__(
        self, bm25: Bm25, terms: list[list[int]], scopes: dict[tuple[str, int], np.ndarray]
    ) -> None:
        super().__init__()
        self.bm25 = bm25
        self.terms = terms
        self.scopes = scopes  # (case, query index) -> in-scope row indices

    def ingest(self, data: SpeedData, batch: int) -> dict[str, Any]:
        self.x = data.vectors
        return {"write_s": 0.0, "index_s": 0.0}

    def search(self, query: Query) -> list[int]:
        rows = self.scopes[(query.case, query.index)]
        if query.case == "lexical":
            found = floor_lexical(self.bm25, self.terms[query.index], rows, 10)
        elif query.case == "hybrid_filtered":
            found = floor_hybrid(self.x, self.bm25, rows, query.vector, self.terms[query.index], 10)
        else:
            found = floor_semantic(self.x, rows, query.vector, 10)
        return [int(i) for i in found]

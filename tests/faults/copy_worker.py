"""A process that saves vector copies over and over, for the fault suite:
``python copy_worker.py PATH SEED ROUNDS``.

Each round rewrites or adds a batch of vectors (ids ``v0``..) and searches, so with
``ERSTWHILE_TEST_VECTOR_SAVE_MIN`` lowered its writer thread saves the matrix again
and again; prints ``round N`` after each. Killed with -9 by the test at any point.
"""

from __future__ import annotations

import sys

import numpy as np

import erstwhile
from erstwhile.embedding import HashEmbedder

DIMENSIONS = 32
BATCH = 150


def main() -> None:
    path, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(seed)
    with erstwhile.open(path, embedder=HashEmbedder(DIMENSIONS), background_jobs=False) as m:
        for round_ in range(rounds):
            vectors = rng.normal(size=(BATCH, DIMENSIONS)).astype(np.float32)
            ids = rng.choice(1200, BATCH, replace=False)
            m.upsert("ns", [
                {"id": f"v{i}", "content": f"vector {i} round {round_}", "vector": v.tolist()}
                for i, v in zip(ids.tolist(), vectors, strict=True)
            ])  # fmt: skip
            m.search("ns", query_vector=vectors[0].tolist(), top_k=5, include_historical=True)
            print(f"round {round_}", flush=True)


if __name__ == "__main__":
    main()

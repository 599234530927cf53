"""A writer process for the fault suite: ``python writer.py TARGET WORKER BATCHES SIZE ACKS``.

Writes BATCHES batches of SIZE records (ids ``w{worker}-b{batch}-{j}``, metadata
``batch``) and, every third batch, tries to take over the key ``shared`` by
superseding its holder, racing the other writers. After each write the store
acknowledged, appends one line to ACKS: ``batch W-B`` or ``chain ID``. A refused
supersession (lost race) is a ``refused`` line. Nothing else is printed.
"""

from __future__ import annotations

import sys

import erstwhile
from erstwhile.domain.errors import NotFound, WriteConflict

NAMESPACE = "faults"


def main() -> None:
    target, worker, batches, size, acks = sys.argv[1:6]
    with (
        erstwhile.open(target, embedder="hash", background_jobs=False) as m,
        open(acks, "a", buffering=1, encoding="utf-8") as log,
    ):
        for batch in range(int(batches)):
            tag = f"{worker}-{batch}"
            records = [
                {"id": f"w{tag}-{j}", "content": f"fault record {tag} number {j}",
                 "metadata": {"batch": tag}, "tags": [f"w{worker}"]}
                for j in range(int(size))
            ]  # fmt: skip
            m.upsert(NAMESPACE, records)
            log.write(f"batch {tag}\n")
            if batch % 3 == 0:
                chain(m, log, f"s{tag}")


def chain(m: erstwhile.Memory, log: object, new_id: str) -> None:
    found = m.search(NAMESPACE, "shared", key="shared", ranking="lexical", top_k=1)
    record = {"id": new_id, "content": f"shared holder {new_id}", "key": "shared"}
    if found.hits:
        record["supersedes"] = [found.hits[0].record.id]  # type: ignore[assignment]
    try:
        m.upsert(NAMESPACE, [record])
    except (WriteConflict, NotFound):
        log.write(f"refused {new_id}\n")  # type: ignore[attr-defined]
        return
    log.write(f"chain {new_id}\n")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()

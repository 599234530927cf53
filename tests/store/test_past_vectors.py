"""SQLite's in-memory copy of the kept vectors (past_vectors) for the semantic
``known_at`` lane: it follows writes through another handle, and a hard delete leaves
it before the next search scores anything. Scores themselves are checked against
snapshots in test_known_at_oracle.py, which runs both the copy and the file path."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import erstwhile
from erstwhile.domain.time import format_instant

BASE = 1_704_067_200 * 1_000_000


def test_the_copy_follows_another_handle_and_a_hard_delete(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    reader = erstwhile.open(path, embedder="hash", background_jobs=False)
    writer = erstwhile.open(path, embedder="hash", background_jobs=False)
    clock = [BASE]
    writer.service.clock = lambda: clock[0]
    past = reader.service.store.dialect._past  # type: ignore[attr-defined]
    past.warm_after = 1
    embedder = reader.service.embedder_for("ns")
    assert embedder is not None
    try:
        writer.upsert("ns", [{"id": "a", "content": "river stone"},
                             {"id": "b", "content": "cloud apple"}])  # fmt: skip
        then = format_instant(BASE + 1)
        clock[0] += 10
        writer.upsert("ns", [{"id": "a", "content": "apple cloud"}])  # a's old vector kept

        def scores() -> dict[str, float]:
            found = reader.search("ns", "river", ranking="semantic", known_at=then)
            return {h.record.id: h.score for h in found.hits}

        query = embedder.embed_query("river")
        old = embedder.embed_documents(["river stone"])[0]
        assert abs(scores()["a"] - float(np.dot(query, old))) < 1e-5  # its old vector
        held = {record for record, _ in past.held(embedder.embedder_id)}
        assert len(held) == 1  # only a has a replaced content
        clock[0] += 10
        writer.upsert("ns", [{"id": "b", "content": "stone river"}])  # through the other handle
        assert len(past.held(embedder.embedder_id)) == 1  # not read until a search needs it
        assert set(scores()) == {"a", "b"}
        assert len(past.held(embedder.embedder_id)) == 2  # b's old vector came in on refresh
        writer.delete("ns", "a", hard=True)
        assert set(scores()) == {"b"}
        assert held.isdisjoint(record for record, _ in past.held(embedder.embedder_id))  # gone
    finally:
        reader.close()
        writer.close()

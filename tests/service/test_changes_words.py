"""``changes`` names a supersession as ``audit`` and the inspector do: the replaced
record is "superseded" (its replacement "added"), and only a record closed without a
successor is "invalidated" — on both backends."""

from __future__ import annotations

import erstwhile


def test_changes_says_superseded_where_audit_does(memory: erstwhile.Memory) -> None:
    ns = "words"
    memory.upsert(ns, [{"id": "old", "content": "the office is in Leeds"},
                       {"id": "gone", "content": "the lease ends in May"}])  # fmt: skip
    memory.supersede(ns, "old", {"id": "new", "content": "the office is in York"})
    memory.invalidate(ns, "gone")
    page = memory.changes(ns, since="2000-01-01")
    kinds = [(c.change, c.id) for c in page.changes]
    assert kinds == [("added", "old"), ("added", "gone"), ("superseded", "old"),
                     ("added", "new"), ("invalidated", "gone")]  # fmt: skip
    counts = memory.service.audit(ns)["records"]
    said = [change for change, _ in kinds]
    assert (counts["superseded"], counts["invalidated"]) == (
        said.count("superseded"), said.count("invalidated"),
    )  # fmt: skip
    assert memory.get(ns, "old").superseded_by == "new"  # what the inspector reads

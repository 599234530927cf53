"""A store written before record time was kept gains it from its versions: the
migration fills the past from ``record_versions`` (both backends)."""

from __future__ import annotations

import memstrata
from memstrata.domain.time import format_instant, to_us

NAMES = {"sqlite": "m008_record_time", "postgres": "m006_record_time"}
TABLES = ("past_vectors", "past_meta", "past_tags", "record_past")


def test_the_past_is_filled_from_the_versions(backend: str, store_target: str) -> None:
    target = store_target
    with memstrata.open(target, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [{"id": "a", "content": "apple pie", "tags": ["t"]}])
        first = m.get("ns", "a").updated_at
        m.upsert("ns", [{"id": "a", "content": "river stone", "tags": ["u"]}])
        m.delete("ns", "a")
        store = m.service.store

        def undo(tx: object) -> None:  # the store as the previous release left it
            for table in TABLES:
                tx.execute(f"DROP TABLE {table}")  # type: ignore[attr-defined]
            tx.execute(  # type: ignore[attr-defined]
                "DELETE FROM schema_migrations WHERE name = ?", (NAMES[backend],)
            )

        store.db.write(undo)
    with memstrata.open(target, embedder="hash", background_jobs=False) as m:
        known = m.get("ns", "a", known_at=format_instant(to_us(first)))
        assert (known.version, known.content, known.tags) == (1, "apple pie", ["t"])
        assert known.known_until is not None and known.deleted_at is None
        found = m.search("ns", "apple", ranking="lexical", tags=["t"], known_at=first)
        assert found.ids() == ["a"]
        assert m.search("ns", "apple", ranking="lexical", tags=["t"]).ids() == []

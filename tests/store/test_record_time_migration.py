"""A store written before record time was kept gains it from its versions: the
migration fills the past from ``record_versions``; and a store written before the
versions table went keeps every version when it goes (both backends)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import erstwhile
from erstwhile import backups
from erstwhile.domain.time import format_instant, to_us
from erstwhile.store.sql import maintenance

NAMES = {"sqlite": "m008_record_time", "postgres": "m006_record_time"}
DROPPED = {"sqlite": "m014_versions_from_the_past", "postgres": "m013_versions_from_the_past"}
TABLES = ("past_vectors", "past_meta", "past_tags", "record_past")
#: The versions table as stores before the drop held it.
VERSIONS = (
    "CREATE TABLE record_versions (namespace TEXT NOT NULL, id TEXT NOT NULL,"
    " version INTEGER NOT NULL, body TEXT NOT NULL, payload {blob},"
    " PRIMARY KEY (namespace, id, version))"
)


def _versions_table(m: erstwhile.Memory, backend: str) -> Any:
    """A write that recreates ``record_versions`` as an older release kept it: each
    version's JSON (without the payload, kept beside it), from the versions read now."""
    store = m.service.store
    rows = []
    with store.reader() as read:
        for record in maintenance.versions(read, "ns"):
            body = record.to_json()
            body.pop("payload", None)
            rows.append((record.namespace, record.id, record.version,
                         json.dumps(body, sort_keys=True), record.payload))  # fmt: skip

    def create(tx: Any) -> None:
        tx.execute(VERSIONS.format(blob="BLOB" if backend == "sqlite" else "bytea"))
        for row in rows:
            tx.execute("INSERT INTO record_versions VALUES (?, ?, ?, ?, ?)", row)

    return create


def test_the_past_is_filled_from_the_versions(backend: str, store_target: str) -> None:
    if backend == "citus":
        pytest.skip("no release before this one ran on Citus: an upgrade from before this "
                    "migration never meets a distributed store")  # fmt: skip
    target = store_target
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [{"id": "a", "content": "apple pie", "tags": ["t"]}])
        first = m.get("ns", "a").updated_at
        m.upsert("ns", [{"id": "a", "content": "river stone", "tags": ["u"]}])
        m.delete("ns", "a")
        store = m.service.store

        versions = _versions_table(m, backend)

        def undo(tx: Any) -> None:  # the store as a release before record time left it
            versions(tx)
            for table in TABLES:
                tx.execute(f"DROP TABLE {table}")
            for name in (NAMES[backend], DROPPED[backend]):
                tx.execute("DELETE FROM schema_migrations WHERE name = ?", (name,))

        store.db.write(undo)
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        known = m.get("ns", "a", known_at=format_instant(to_us(first)))
        assert (known.version, known.content, known.tags) == (1, "apple pie", ["t"])
        assert known.known_until is not None and known.deleted_at is None
        found = m.search("ns", "apple", ranking="lexical", tags=["t"], known_at=first)
        assert found.ids() == ["a"]
        assert m.search("ns", "apple", ranking="lexical", tags=["t"]).ids() == []
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        # filled by the first migration, each version once: the drop copied none again
        assert backups.check(m).ok
        assert m.service.store.versions("ns", "a") == [1, 2, 3]


def test_dropping_the_versions_keeps_a_version_only_it_held(
    backend: str, store_target: str
) -> None:
    if backend == "citus":
        pytest.skip("no release before this one ran on Citus: an upgrade from before this "
                    "migration never meets a distributed store")  # fmt: skip
    target = store_target
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [{"id": "a", "content": "apple pie", "payload": b"\x00p"}])
        m.upsert("ns", [{"id": "a", "content": "river stone", "metadata": {"k": "v"}}])
        m.upsert("ns", [{"id": "a", "content": "a third text"}])
        m.upsert("ns", [{"id": "b", "content": "only one version"}])
        expected = {v: m.get("ns", "a", version=v).to_json() for v in (1, 2, 3)}
        versions = _versions_table(m, backend)

        def undo(tx: Any) -> None:  # version 2 held by the versions table alone
            versions(tx)
            tx.execute("DELETE FROM record_past WHERE id = 'a' AND version = 2")
            tx.execute("DELETE FROM schema_migrations WHERE name = ?", (DROPPED[backend],))

        m.service.store.db.write(undo)
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        assert {v: m.get("ns", "a", version=v).to_json() for v in (1, 2, 3)} == expected
        assert m.get("ns", "a", version=1).payload == b"\x00p"
        assert m.service.store.versions("ns", "b") == [1]
        assert backups.check(m).ok
        with m.service.store.reader() as read:
            gone = read("SELECT count(*) FROM schema_migrations WHERE name = ?",
                        [DROPPED[backend]])  # fmt: skip
        assert gone == [(1,)]
        with pytest.raises(Exception, match="record_versions"), m.service.store.reader() as read:
            read("SELECT count(*) FROM record_versions", [])

"""backup, export, import of an export, check (SPEC §9), on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support import pg
from tests.support.raw import execute

import erstwhile
from erstwhile import backups
from erstwhile.domain.errors import InvalidInput, WriteConflict
from erstwhile.domain.records import Record


def populate(m: erstwhile.Memory) -> None:
    """Every kind of state an export must carry: versions, chains with keys, validity,
    tombstones, trust, payloads, metadata, origins, a merge, a hard-deleted link."""
    a = m.add("agent", "Alice works at Acme", id="alice-1", key="alice.employer",
              valid_from="2023-01-01", tags=["work"], metadata={"team": "core"})  # fmt: skip
    m.upsert("agent", [{"id": a, "content": "Alice works at Acme Corp", "key": "alice.employer"}])
    m.supersede("agent", a, {"id": "alice-2", "content": "Alice works at Globex",
                             "valid_from": "2024-06-01"})  # fmt: skip
    m.verify("agent", "alice-2", reviewer="bob")
    m.add("agent", "Temporary fact", id="temp", valid_from="2024-01-01", valid_to="2025-01-01")
    m.add("agent", "Soon gone", id="gone", valid_from="2024-01-01")
    m.invalidate("agent", "gone", at="2025-02-01")
    m.add("agent", "Forgotten", id="forgotten", source="chat:42")
    m.delete("agent", "forgotten")
    origin = {"source": "docs", "document": "a.md", "chunk": 2}
    m.upsert("agent", [Record(id="blob", content="binary", payload=b"\x00\xff\x10 b",
                              origin=origin)])  # type: ignore[arg-type]  # fmt: skip
    m.add("agent", "part one", id="p1")
    m.add("agent", "part two", id="p2")
    m.upsert("agent", [{"id": "merged", "content": "both parts", "supersedes": ["p1", "p2"]}])
    m.add("agent", "to be replaced", id="x1")
    m.supersede("agent", "x1", {"id": "x2", "content": "replacement, then hard-deleted"})
    m.delete("agent", "x2", hard=True)
    m.add("other", 'Ünïcödé content ✓ and "quotes"\nnewline', id="u/1", tags=["a", "b"])


def export_text(m: erstwhile.Memory, namespace: str | None = None) -> str:
    return "".join(line + "\n" for line in backups.export_lines(m, namespace))


def test_export_holds_every_version_in_canonical_order(tmp_path: Path) -> None:
    with erstwhile.open(tmp_path / "a.db", embedder="hash", background_jobs=False) as m:
        populate(m)
        text = export_text(m)
        only_other = export_text(m, "other")
        assert backups.check(m).ok
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == backups.HEADER
    assert [line["namespace"] for line in lines[1:3]] == ["agent", "other"]  # settings
    assert lines[-1] == {"hard_deleted": "x2", "namespace": "agent"}  # ids only, no content
    lines = [lines[0], *lines[3:-1]]  # no graph: nothing was extracted or asserted
    keys = [(r["namespace"], r["id"], r["version"]) for r in lines[1:]]
    assert keys == sorted(keys)
    alice = [r for r in lines[1:] if r["id"] == "alice-1"]
    assert [r["version"] for r in alice] == [1, 2, 3]
    assert alice[-1]["superseded_by"] == "alice-2" and alice[-1]["valid_to"].startswith("2024-06")
    assert [r["trust"] for r in lines[1:] if r["id"] == "alice-2"] == ["unverified", "verified"]
    assert not any(r["id"] == "x2" for r in lines[1:])  # hard-deleted: gone
    assert only_other.splitlines()[1:] == [
        line for line in text.splitlines()[1:] if json.loads(line)["namespace"] == "other"
    ]
    assert "replacement" not in text


def test_sqlite_to_postgres_to_export_is_byte_identical(
    tmp_path: Path, postgres_server: pg.PgServer
) -> None:
    path = tmp_path / "memory.jsonl"
    with erstwhile.open(tmp_path / "a.db", embedder="hash", background_jobs=False) as m:
        populate(m)
        path.write_text(export_text(m), encoding="utf-8")
    target = postgres_server.new_target()
    try:
        with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
            report = backups.import_export(m, path)
            assert report.namespaces == ["agent", "other"]
            assert export_text(m) == path.read_text(encoding="utf-8")
            # the restored store answers like the original, and keeps its rules
            assert m.search("agent", "Alice works").hits[0].record.id == "alice-2"
            assert [r.id for r in m.history("agent", "alice-2")] == ["alice-1", "alice-2"]
            assert m.get("agent", "blob").payload == b"\x00\xff\x10 b"
            with pytest.raises(WriteConflict):
                m.add("agent", "another Alice", key="alice.employer")
            checked = backups.check(m)
            assert checked.ok, checked.to_json()
            again = tmp_path / "again.jsonl"
            again.write_text(export_text(m), encoding="utf-8")
        with erstwhile.open(tmp_path / "b.db", embedder="hash", background_jobs=False) as m:
            backups.import_export(m, again)
            assert export_text(m) == path.read_text(encoding="utf-8")
            assert m.embed("agent").embedded > 0  # vectors are rebuilt, not exported
            assert backups.check(m).ok
    finally:
        postgres_server.drop_target(target)


def test_import_refuses_held_ids_and_bad_lines_writing_nothing(
    store_target: str, tmp_path: Path
) -> None:
    path = tmp_path / "memory.jsonl"
    with erstwhile.open(tmp_path / "a.db", embedder="hash", background_jobs=False) as m:
        populate(m)
        path.write_text(export_text(m), encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        m.add("other", "already here", id="u/1")
        before = export_text(m)
        with pytest.raises(WriteConflict, match="already holds"):
            backups.import_export(m, path)
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join([*lines[:3], '{"id": 5}', *lines[3:]]) + "\n", encoding="utf-8")
        with pytest.raises(InvalidInput, match="line 4"):
            backups.import_export(m, bad)
        gap = tmp_path / "gap.jsonl"
        gap.write_text("\n".join([*lines[:3], *lines[4:]]) + "\n", encoding="utf-8")
        with pytest.raises(InvalidInput, match="version"):
            backups.import_export(m, gap)
        assert export_text(m) == before


def _corrupt(store_target: str, m: erstwhile.Memory) -> None:
    m.add("ns", "one", id="a", key="k")
    m.supersede("ns", "a", {"id": "b", "content": "two"})
    m.add("ns", "three", id="c")


@pytest.mark.parametrize(
    ("sql", "finding"),
    [
        (
            "UPDATE records SET superseded_by = NULL, valid_to = NULL WHERE id = 'a'",
            "keys held once",
        ),
        ("UPDATE records SET supersedes = '[\"a\"]' WHERE id = 'c'", "chains linear"),
        ("UPDATE records SET superseded_by = 'nowhere' WHERE id = 'c'", "successors present"),
        ("DELETE FROM ledger WHERE record_id = 'c'", "ledger complete"),
        # the past keeps only versions before the current one, each once
        ("UPDATE record_past SET version = 2 WHERE id = 'a'", "versions match records"),
    ],
)
def test_check_finds_broken_invariants(store_target: str, sql: str, finding: str) -> None:
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        _corrupt(store_target, m)
        assert backups.check(m).ok
        execute(store_target, sql)
        report = backups.check(m)
    failed = [f.name for f in report.findings if not f.ok]
    assert finding in failed, report.to_json()
    assert not report.ok


def test_check_finds_a_broken_full_text_index_and_vector(tmp_path: Path) -> None:
    target = str(tmp_path / "m.db")
    with erstwhile.open(target, embedder="hash", background_jobs=False) as m:
        _corrupt(target, m)
        for table in ("lexical_postings", "lexical_docs"):  # its postings, or its tail document
            execute(
                target,
                f"DELETE FROM {table} WHERE record = (SELECT rowid FROM records WHERE id = 'c')",
            )
        execute(target, "UPDATE vectors SET vector = zeroblob(length(vector))"
                " WHERE record = (SELECT rowid FROM records WHERE id = 'b')")  # fmt: skip
        report = backups.check(m)
    failed = {f.name for f in report.findings if not f.ok}
    assert {"full-text index", "vectors readable"} <= failed


def test_a_hard_deleted_successor_is_a_note_not_a_failure(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        _corrupt(store_target, m)
        m.delete("ns", "b", hard=True)
        report = backups.check(m)
    assert report.ok
    (present,) = [f for f in report.findings if f.name == "successors present"]
    assert "hard-deleted" in present.notes[0]


def test_backup_is_sqlite_only_and_never_overwrites(store_target: str, tmp_path: Path) -> None:
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        m.add("ns", "kept", id="a")
        target = tmp_path / "copy.db"
        if m.service.store.backend == "postgres":
            with pytest.raises(InvalidInput, match="pg_dump"):
                backups.backup(m, target)
            return
        backups.backup(m, target)
        with pytest.raises(InvalidInput, match="already exists"):
            backups.backup(m, target)
    with erstwhile.open(target, embedder="hash", background_jobs=False) as copy:
        assert copy.get("ns", "a").content == "kept"
        assert backups.check(copy).ok

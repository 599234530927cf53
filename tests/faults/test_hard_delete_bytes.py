"""A hard delete leaves no byte of the record in the database files (SPEC §1.3).

The scan reads the SQLite file and its WAL as raw bytes, while the store is still open
(the hard delete empties the WAL itself) and again after it closed, looking
for every distinctive string the record carried: content words, tags, metadata keys
and values, its key and its source. Full-text index pages are where FTS5 used to keep
the words (its deletes are markers until segments merge).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.faults.figures import FIGURES

import erstwhile


def _secrets() -> dict[str, str]:
    tag = uuid.uuid4().hex[:10]
    return {
        "content": f"zqcontent{tag}",
        "content2": f"zqsecondword{tag}",
        "tag": f"zqtag{tag}",
        "meta_key": f"zqmetakey{tag}",
        "meta_value": f"zqmetavalue{tag}",
        "key": f"zqkey{tag}",
        "source": f"zqsource{tag}",
        "old_version": f"zqoldversion{tag}",
    }


def _files(path: Path) -> Iterator[Path]:
    for entry in sorted(path.parent.glob(path.name + "*")):  # the vector copies' folder too
        for file in sorted(entry.rglob("*")) if entry.is_dir() else [entry]:
            if file.is_file():
                yield file


def _traces(path: Path, secrets: dict[str, str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for file in _files(path):
        data = file.read_bytes()
        hits = [name for name, text in secrets.items() if text.encode() in data]
        if hits:
            found[file.name] = hits
    return found


def _write(memory: erstwhile.Memory, secrets: dict[str, str], rid: str) -> None:
    memory.upsert("ns", [{
        "id": rid, "content": f"the {secrets['old_version']} words", "key": secrets["key"],
    }])  # fmt: skip
    memory.upsert("ns", [{
        "id": rid, "content": f"{secrets['content']} and {secrets['content2']}",
        "tags": [secrets["tag"]], "metadata": {secrets["meta_key"]: secrets["meta_value"]},
        "key": secrets["key"], "source": secrets["source"],
    }])  # fmt: skip


def _checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def test_store_connections_set_secure_delete(tmp_path: Path) -> None:
    with erstwhile.open(tmp_path / "m.db", embedder="none", background_jobs=False) as m:
        conn = m.service.store.db.conn()  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


def _assert_scrubbed(path: Path, secrets: dict[str, str]) -> None:
    _checkpoint(path)
    traces = _traces(path, secrets)
    FIGURES.add("hard-delete scans", 1)
    FIGURES.add("hard-delete traces", sum(len(v) for v in traces.values()))
    assert traces == {}


@pytest.mark.parametrize("how", ["delete", "expire"])
def test_hard_delete_scrubs_every_byte(tmp_path: Path, how: str) -> None:
    path = tmp_path / "m.db"
    secrets = _secrets()
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        # neighbours share the index pages, so the purge cannot just drop whole pages
        m.upsert("ns", [{"content": f"neighbour words number {i}"} for i in range(200)])
        _write(m, secrets, "secret")
        _checkpoint(path)
        assert _traces(path, secrets), "the scan must see the record before the delete"
        if how == "delete":
            m.delete("ns", "secret", hard=True)
        else:
            scope = {secrets["meta_key"]: secrets["meta_value"]}
            assert m.expire("ns", filter=scope, action="hard_delete", max_rows=10) == 1
        assert m.search("ns", "neighbour", ranking="lexical").hits  # the index still works
        # while the store is open: the file and its WAL (emptied by the delete itself)
        traces = _traces(path, secrets)
        assert traces == {}, traces
    _assert_scrubbed(path, secrets)  # and after a checkpoint and close


def test_hard_delete_scrubs_every_byte_beside_a_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes before the delete bring SQLite's lexical tail to its bound, so a
    merge beside the writers is under way or about to start as the delete empties
    the WAL: whichever comes first, no byte of the record is left."""
    from erstwhile.store.sqlite import lexical_merge

    monkeypatch.setattr(lexical_merge, "TAIL_ROWS", 50)
    monkeypatch.setattr(lexical_merge, "TAIL_MAX", 50)
    path = tmp_path / "m.db"
    secrets = _secrets()
    with erstwhile.open(path, embedder="hash", background_jobs=False) as m:
        for start in range(0, 200, 49):
            m.upsert("ns", [{"content": f"neighbour words number {i}"}
                            for i in range(start, start + 49)])  # fmt: skip
        _write(m, secrets, "secret")
        m.upsert("ns", [{"content": f"neighbour words {i}"} for i in range(300, 350)])
        m.delete("ns", "secret", hard=True)
        traces = _traces(path, secrets)
        assert traces == {}, traces
        assert len(m.search("ns", "neighbour", ranking="lexical", top_k=300).hits) == 295
    _assert_scrubbed(path, secrets)

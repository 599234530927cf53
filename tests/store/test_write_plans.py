"""A write of one record reads and changes that record's rows, never a whole
namespace's: SQLite, which keeps no statistics here, once ranged over a namespace's
postings for one record's rewrite (1.2 s a statement at 100k records). Each statement
a write runs is traced and its query plan read; the plans do not depend on the store's
size, so a small store shows what a large one would do."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import erstwhile
from erstwhile.embedding.hash import HashEmbedder

# tables read by the namespace alone because the namespace is their whole key, or
# (lexical_segments, lexical_pending) its merges, a few, or (entities) because resolution compares a
# new name with every entity of the namespace;
# and tables of one row, or (lexical_tail) of a bounded few, which a merge reads whole;
# and a multi-row VALUES list, the statement's own rows ("SCAN 4 CONSTANT ROWS")
KEYED_BY_NAMESPACE = {"lexical_stats", "lexical_segments", "lexical_pending", "entities"}
ONE_ROW = {"vector_seq", "lexical_tail", "sqlite_sequence", "CONSTANT ROW"}
OWN_ROWS = re.compile(r"\d+ CONSTANT ROWS")
DML = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
NAMESPACE_RANGE = re.compile(r"^(?:SEARCH|SCAN) (\w+) .*\(namespace=\?\)$")
SCAN = re.compile(r"^SCAN (.+?)(?: USING .*)?$")


def wide_reads(db: Path, statements: list[str]) -> list[str]:
    plain = sqlite3.connect(db)
    found = []
    for sql in statements:
        if not DML.match(sql):
            continue
        for *_, step in plain.execute("EXPLAIN QUERY PLAN " + sql).fetchall():
            ranged = NAMESPACE_RANGE.match(step)
            scanned = SCAN.match(step)
            if (ranged and ranged[1] not in KEYED_BY_NAMESPACE) or (
                scanned and scanned[1] not in ONE_ROW and not OWN_ROWS.fullmatch(scanned[1])
            ):
                found.append(f"{step}  <=  {sql[:200]}")
    plain.close()
    return found


def test_a_one_record_write_reads_only_that_records_rows(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    memory = erstwhile.open(str(path), embedder=HashEmbedder(dimensions=16), background_jobs=False)
    memory.upsert("ns", [
        {"id": f"r{i}", "content": f"alpha beta {i} gamma", "tags": ["t", f"t{i}"],
         "metadata": {"room": f"room-{i % 3}"}}
        for i in range(40)
    ])  # fmt: skip
    memory.upsert("other", [{"id": "o1", "content": "alpha elsewhere"}])
    for rid in ("r1", "r5", "r7"):
        memory.mention("ns", rid, ["Ada", {"name": "Launch", "kind": "project"}])
    memory.assert_fact("ns", "Ada", "leads", "Launch", valid_from="2024-01-01")
    statements: list[str] = []
    conn = memory.service.store.db.conn()
    conn.set_trace_callback(statements.append)
    memory.upsert("ns", [{"id": "r1", "content": "a new text entirely", "tags": ["u"]}])
    memory.supersede("ns", "r2", {"id": "s2", "content": "its replacement"})
    memory.invalidate("ns", "r3")
    memory.delete("ns", "r4")
    memory.delete("ns", "r5", hard=True)
    memory.verify("ns", "r6", "alice")
    memory.mention("ns", "r8", ["Grace"])
    memory.assert_fact("ns", "Grace", "leads", "Launch", valid_from="2024-02-01")
    conn.set_trace_callback(None)
    assert any("lexical_postings" in sql for sql in statements)  # the rewrite was traced
    assert memory.get("ns", "r1").content == "a new text entirely"
    assert memory.search("ns", "alpha", ranking="lexical", top_k=50).ids().count("r1") == 0
    wide = wide_reads(path, statements)
    assert not wide, "\n".join(wide)
    memory.close()

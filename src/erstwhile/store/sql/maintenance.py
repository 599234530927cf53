"""Export and check, as both dialects run them: reads of the tables every backend
shares (``records``, ``record_past``, ``ledger``, ``vectors``' key columns)
through a :data:`Read` of one snapshot. What only one engine can verify (SQLite's
``integrity_check``, FTS5's ``integrity-check``) is its dialect's ``integrity``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from erstwhile.domain.records import Record
from erstwhile.domain.words import DEFAULT_LANGUAGE
from erstwhile.store.sql.rows import COLUMNS, prefixed, record_from_row

Read = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


#: Versions read per statement while exporting, so memory stays bounded.
PAGE = 1000


def versions(read: Read, namespace: str | None = None) -> Iterator[Record]:
    """Every stored version of every record (its current row and the past rows that
    kept the versions it replaced), ordered by namespace, id and version (byte order,
    the same on every backend), read a page at a time."""
    after: tuple[str, str, int] = ("", "", 0)
    scope, scoped = ("namespace = ? AND ", [namespace]) if namespace is not None else ("", [])
    # each table's next page by its own (namespace, id) index, the two merged
    parts = [
        f"SELECT * FROM (SELECT {columns} FROM {table} WHERE {scope}"
        "(namespace, id, version) > (?, ?, ?) ORDER BY namespace, id, version LIMIT ?) AS p"
        for table, columns in (
            ("records", COLUMNS),
            ("record_past", prefixed("record_past", "record")),
        )
    ]
    while True:
        rows = read(
            f"SELECT * FROM ({' UNION ALL '.join(parts)}) AS v"
            " ORDER BY v.namespace, v.id, v.version LIMIT ?",
            [*scoped, *after, PAGE] * 2 + [PAGE],
        )
        for row in rows:
            yield record_from_row(row)
        if len(rows) < PAGE:
            return
        after = (rows[-1][1], rows[-1][2], rows[-1][-1])


def hard_deleted(read: Read, namespace: str | None = None) -> list[tuple[str, str]]:
    """(namespace, id) of every hard-deleted record the store does not hold again: the
    ledger keeps that they existed (their ids only), which explains a dangling link."""
    scope, scoped = ("l.namespace = ? AND ", [namespace]) if namespace is not None else ("", [])
    rows = read(
        "SELECT DISTINCT l.namespace, l.record_id FROM ledger l"
        f" WHERE {scope}l.op = 'hard_delete' AND NOT EXISTS (SELECT 1 FROM records r"
        " WHERE r.namespace = l.namespace AND r.id = l.record_id)"
        " ORDER BY l.namespace, l.record_id",
        scoped,
    )
    return [(row[0], row[1]) for row in rows]


def namespaces(read: Read, namespace: str | None = None) -> list[str]:
    """The store's namespaces (only ``namespace``, if it is one), in byte order."""
    names = sorted(row[0] for row in read("SELECT name FROM namespaces", []))
    return [n for n in names if namespace is None or n == namespace]


def text_search(read: Read, namespace: str) -> str:
    """The text-search language the namespace is indexed in (the default before any)."""
    rows = read("SELECT language FROM lexical_stats WHERE namespace = ?", [namespace])
    return str(rows[0][0]) if rows else DEFAULT_LANGUAGE


def existing_ids(read: Read, namespace: str, ids: Sequence[str]) -> list[str]:
    """Which of ``ids`` the namespace already holds (current rows)."""
    found: list[str] = []
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ", ".join("?" for _ in chunk)
        found += [
            row[0]
            for row in read(
                f"SELECT id FROM records WHERE namespace = ? AND id IN ({marks})",
                [namespace, *chunk],
            )
        ]
    return found


@dataclass
class Finding:
    """One invariant and what the check found: ``problems`` empty means it holds."""

    name: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "problems": self.problems, "notes": self.notes}


def _key_holders(read: Read, now: int) -> Finding:
    """No key held by two current live records (the rule ``upsert`` enforces)."""
    finding = Finding("keys held once")
    for namespace, key, count in read(
        "SELECT namespace, key, count(*) FROM records WHERE key IS NOT NULL"
        " AND deleted_at IS NULL AND superseded_by IS NULL"
        " AND (valid_to IS NULL OR valid_to > ?) GROUP BY namespace, key HAVING count(*) > 1",
        [now],
    ):
        finding.problems.append(f"{namespace}: key {key!r} is held by {count} current records")
    return finding


def _chains(read: Read) -> tuple[Finding, Finding]:
    """Supersession chains are linear (each link agrees from both ends, no cycles), and
    every superseded record's successor is present (or was hard-deleted, ledgered)."""
    linear = Finding("chains linear")
    present = Finding("successors present")
    rows = read(
        "SELECT namespace, id, supersedes, superseded_by FROM records"
        " WHERE superseded_by IS NOT NULL OR supersedes <> '[]'",
        [],
    )
    successor = {(ns, rid): by for ns, rid, _, by in rows}
    linked = {(ns, rid) for ns, rid, _, _ in rows}
    hard_deleted = {
        (ns, rid)
        for ns, rid in read(
            "SELECT DISTINCT namespace, record_id FROM ledger WHERE op = 'hard_delete'", []
        )
    }
    missing = [(ns, by) for (ns, _), by in successor.items() if by and (ns, by) not in linked]
    if missing:
        there = set()
        for ns in {ns for ns, _ in missing}:
            there |= {
                (ns, rid) for rid in existing_ids(read, ns, [b for n, b in missing if n == ns])
            }
        for (ns, rid), by in sorted(successor.items()):
            if by is None or (ns, by) in linked or (ns, by) in there:
                continue
            if (ns, by) in hard_deleted:
                present.notes.append(f"{ns}: {rid!r} was superseded by {by!r}, since hard-deleted")
            else:
                present.problems.append(f"{ns}: {rid!r} is superseded by {by!r}, which is missing")
    for ns, rid, supersedes, _ in rows:
        for old in json.loads(supersedes):
            if (ns, old) in successor and successor[(ns, old)] != rid:
                linear.problems.append(
                    f"{ns}: {rid!r} supersedes {old!r}, which names "
                    f"{successor[(ns, old)]!r} as its successor (a fork)"
                )
    for (ns, start), _ in sorted(successor.items()):
        seen = {start}
        at = successor.get((ns, start))
        while at is not None:
            if at in seen:
                linear.problems.append(f"{ns}: the chain through {start!r} loops at {at!r}")
                break
            seen.add(at)
            at = successor.get((ns, at))
    return linear, present


def _ledger(read: Read, backend: str) -> Finding:
    """The ledger's sequence has no gaps (SQLite) and every version is ledgered."""
    finding = Finding("ledger complete")
    ((low, high, count),) = read("SELECT min(seq), max(seq), count(*) FROM ledger", [])
    gaps = 0 if not count else (high - low + 1) - count
    if gaps and backend == "sqlite":
        finding.problems.append(f"{gaps} ledger sequence numbers are missing below {high}")
    elif gaps:
        # a PostgreSQL identity skips the values of rolled-back transactions
        finding.notes.append(f"{gaps} sequence numbers skipped by rolled-back transactions")
    if count and backend == "sqlite" and low != 1:
        finding.problems.append(f"the ledger starts at {low}, not 1: earlier entries are gone")
    unledgered = read(
        "SELECT v.namespace, v.id, v.version FROM (SELECT namespace, id, version FROM records"
        " UNION ALL SELECT namespace, id, version FROM record_past) AS v WHERE NOT EXISTS"
        " (SELECT 1 FROM ledger l WHERE l.namespace = v.namespace AND l.record_id = v.id"
        " AND l.version = v.version) ORDER BY v.namespace, v.id, v.version LIMIT 20",
        [],
    )
    for ns, rid, version in unledgered:
        finding.problems.append(f"{ns}: version {version} of {rid!r} has no ledger entry")
    return finding


def _versions(read: Read) -> Finding:
    """Each record's current row is its latest version: every version its past kept
    is an earlier one, of the same id, and no two are the same."""
    finding = Finding("versions match records")
    for ns, rid, version, latest, count, numbers in read(
        "SELECT r.namespace, r.id, r.version, max(p.version), count(*),"
        " count(DISTINCT p.version) FROM records r JOIN record_past p"
        " ON p.namespace = r.namespace AND p.record = r.rowid GROUP BY r.namespace, r.id,"
        " r.version HAVING max(p.version) >= r.version OR count(*) <> count(DISTINCT p.version)"
        " OR min(p.id) <> r.id OR max(p.id) <> r.id LIMIT 20",
        [],
    ):
        if count != numbers:
            finding.problems.append(f"{ns}: {rid!r} has {count - numbers} repeated past versions")
        else:
            finding.problems.append(
                f"{ns}: {rid!r} is at version {version}, but its past holds version {latest}"
                " or another record's versions"
            )
    return finding


def embedder_vectors(
    read: Read, finding: Finding, namespace: str, embedder_id: str, dimensions: int
) -> None:
    """Adds to ``finding`` the namespace's vectors for its embedder of the wrong size."""
    ((wrong,),) = read(
        "SELECT count(*) FROM vectors v JOIN records r ON r.rowid = v.record"
        " WHERE r.namespace = ? AND v.embedder_id = ? AND v.dimensions > 0"
        " AND v.dimensions <> ?",
        [namespace, embedder_id, dimensions],
    )
    if wrong:
        finding.problems.append(
            f"{namespace}: {wrong} {embedder_id} vectors are not of {dimensions} dimensions"
        )


def invariants(read: Read, backend: str, now: int) -> list[Finding]:
    """The invariants every backend keeps, checked from its tables."""
    linear, present = _chains(read)
    return [_key_holders(read, now), linear, present, _versions(read), _ledger(read, backend)]

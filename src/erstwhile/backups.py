"""Keeping memory safe (SPEC §9): ``backup``, ``export``, import of an export, ``check``.

    backup(memory, path)        a consistent online copy of a live SQLite store
    export_lines(memory, ns?)   JSON Lines: a header, then every version of every record
    import_export(memory, path) restores an export on either backend
    check(memory)               verifies the store's invariants -> CheckReport

**The export is canonical.** Line 1 is ``{"format":1,"erstwhile":"export"}``; every
other line is one stored version of one record, exactly as ``get(ns, id, version=N)``
returns it (server fields included: trust, record times, version, superseded_by),
ordered by namespace, id and version, with sorted keys and no spaces; then one
``{"hard_deleted": id, "namespace": ns}`` line per hard-deleted id (the ledger's, ids
only), which explains a supersession link that ends at nothing. So the same
store exports the same bytes on SQLite and on PostgreSQL, and an export imported into
either backend and exported again is byte-identical. Vectors are derived and not
exported: the embed job rebuilds them (``erstwhile embed``).

**Import restores, it does not write.** Versions are written as they were, ledgered
as ``import``; an id the store already holds is refused before anything is written.
Records are written in batches (each record's versions in one transaction).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from erstwhile.domain.errors import InvalidInput, WriteConflict
from erstwhile.domain.records import Record, validate_namespace, validate_record_id
from erstwhile.domain.time import now_us
from erstwhile.domain.validation import as_invalid_input
from erstwhile.memory import Memory
from erstwhile.service import LOCAL_ACTOR
from erstwhile.store.sql import maintenance
from erstwhile.store.sql.maintenance import Finding

HEADER: dict[str, Any] = {"format": 1, "erstwhile": "export"}
RESTORE_BATCH = 500


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def backup(memory: Memory, path: str | os.PathLike[str]) -> None:
    """Copies a live SQLite store to ``path`` (a new file), safe while writers run."""
    memory.service.store.backup(str(Path(path).expanduser()))


def export_lines(memory: Memory, namespace: str | None = None) -> Iterator[str]:
    """The export, line by line (without newlines), read from one snapshot."""
    if namespace is not None:
        validate_namespace(namespace)
    yield _line(HEADER)
    with memory.service.store.reader() as read:
        for record in maintenance.versions(read, namespace):
            yield _line(record.to_json())
        for ns, record_id in maintenance.hard_deleted(read, namespace):
            yield _line({"hard_deleted": record_id, "namespace": ns})


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with an export header."""
    try:
        with open(path, encoding="utf-8") as file:
            first = file.readline()
        return bool(json.loads(first) == HEADER)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


@dataclass(frozen=True)
class RestoreReport:
    records: int
    versions: int
    namespaces: list[str]


def _read_export(path: Path) -> tuple[list[list[Record]], list[tuple[str, str]]]:
    """Every record's versions and the hard-deleted ids, checked whole before anything
    is written."""
    records: list[list[Record]] = []
    gone: list[tuple[str, str]] = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if number == 1:
                if not line.strip() or json.loads(line) != HEADER:
                    raise InvalidInput(f"{path.name} is not a erstwhile export (no header)")
                continue
            if not line.strip():
                continue
            if line.startswith('{"hard_deleted":'):
                entry = json.loads(line)
                validate_namespace(entry.get("namespace"))
                validate_record_id(entry["hard_deleted"], f"line {number}: hard_deleted")
                gone.append((entry["namespace"], entry["hard_deleted"]))
                continue
            try:
                record = Record.model_validate_json(line)
            except ValidationError as error:
                raise as_invalid_input(error, f"line {number}") from None
            validate_namespace(record.namespace)
            last = records[-1][-1] if records else None
            if last is not None and (last.namespace, last.id) == (record.namespace, record.id):
                if record.version != (last.version or 0) + 1:
                    raise InvalidInput(
                        f"line {number}: version {record.version} of {record.id!r} follows "
                        f"version {last.version}; an export lists every version in order"
                    )
                records[-1].append(record)
            elif record.version != 1:
                raise InvalidInput(
                    f"line {number}: {record.id!r} starts at version {record.version}, not 1"
                )
            else:
                records.append([record])
    return records, gone


def import_export(
    memory: Memory, path: str | os.PathLike[str], *, actor: str = LOCAL_ACTOR
) -> RestoreReport:
    """Restores an export into ``memory`` (any backend). Refuses, writing nothing, when
    a line is malformed or the store already holds one of the exported ids."""
    records, gone = _read_export(Path(path))
    store = memory.service.store
    by_namespace: dict[str, list[str]] = {}
    for versions in records:
        by_namespace.setdefault(versions[0].namespace, []).append(versions[0].id)
    with store.reader() as read:
        for namespace, ids in by_namespace.items():
            held = maintenance.existing_ids(read, namespace, ids)
            if held:
                raise WriteConflict(
                    f"namespace {namespace!r} already holds {len(held)} of the exported "
                    f"records (e.g. {held[0]!r}); import an export into an empty store"
                )
    now = now_us()
    for start in range(0, len(records), RESTORE_BATCH):
        store.restore(records[start : start + RESTORE_BATCH], now=now, actor=actor)
    store.restore([], now=now, actor=actor, hard_deleted=gone)
    return RestoreReport(
        records=len(records),
        versions=sum(len(v) for v in records),
        namespaces=sorted(by_namespace),
    )


@dataclass
class CheckReport:
    backend: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "backend": self.backend,
            "checks": [finding.to_json() for finding in self.findings],
        }


def check(memory: Memory) -> CheckReport:
    """Verifies the store: the backend's own integrity, then the invariants erstwhile
    keeps (keys, chains, versions, ledger) and the vectors of each namespace's
    current embedder against its backlog."""
    service = memory.service
    store = service.store
    report = CheckReport(backend=store.backend, findings=store.integrity())
    vectors = Finding("embedder vectors")
    with store.reader() as read:
        report.findings += maintenance.invariants(read, store.backend, now_us())
        for namespace in store.namespaces():
            embedder = service.embedder_for(namespace)
            if embedder is None:
                continue
            maintenance.embedder_vectors(
                read, vectors, namespace, embedder.embedder_id, embedder.dimensions
            )
            backlog = store.backlog_count(namespace, embedder.embedder_id)
            if backlog:
                vectors.notes.append(
                    f"{namespace}: {backlog} records wait for a {embedder.embedder_id} "
                    "vector (erstwhile embed fills the backlog)"
                )
    report.findings.append(vectors)
    return report

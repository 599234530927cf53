"""The ledger: an append-only log of every mutation, how any state is explained."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from erstwhile.domain.records import Record
from erstwhile.domain.time import format_instant, parse_instant


@dataclass(frozen=True)
class LedgerEntry:
    seq: int
    at: int
    op: str
    namespace: str
    record_id: str
    version: int | None
    actor: str
    detail: str | None

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON-ready data: the instant in RFC 3339, the detail as the
        object it was written as; absent version and detail left out."""
        data: dict[str, Any] = {
            "seq": self.seq,
            "at": format_instant(self.at),
            "op": self.op,
            "namespace": self.namespace,
            "record_id": self.record_id,
            "actor": self.actor,
        }
        if self.version is not None:
            data["version"] = self.version
        if self.detail:
            data["detail"] = json.loads(self.detail)
        return data


#: What each ledger operation did to the namespace's knowledge, as ``changes`` names
#: it. ``set_embedding`` changes derived data only and is not a change of knowledge.
CHANGE_OF_OP = {
    "create": "added",
    "update": "revised",
    "resurrect": "revised",
    "close": "superseded",  # its validity closed by a replacement, as audit says
    "invalidate": "invalidated",
    "delete": "deleted",
    "hard_delete": "deleted",
    "verify": "verified",
}
CHANGE_OPS = (*CHANGE_OF_OP, "import")


def change_kind(op: str, version: int | None) -> str | None:
    """The change a ledger entry records (an import is an addition at version 1, a
    revision after), or None for an entry that changed no record."""
    if op == "import":
        return "added" if version == 1 else "revised"
    return CHANGE_OF_OP.get(op)


@dataclass(frozen=True)
class Change:
    """One change of a namespace's records in record time (``changes``): its ledger
    ``seq`` (the page cursor), when and by whom, the change and the record's id and
    version, with that version's record when it still exists (not after a hard
    delete)."""

    seq: int
    at: int
    change: str
    op: str
    id: str
    version: int | None
    actor: str
    record: Record | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "seq": self.seq,
            "at": format_instant(self.at),
            "change": self.change,
            "op": self.op,
            "id": self.id,
            "actor": self.actor,
        }
        if self.version is not None:
            data["version"] = self.version
        if self.record is not None:
            data["record"] = self.record.to_json()
        return data


@dataclass(frozen=True)
class ChangesPage:
    """A page of changes, oldest first; ``next`` is the ``after`` of the next page
    (None: this was the last)."""

    changes: list[Change]
    next: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChangesPage:
        """The page as ``to_json`` wrote it (what a client reads)."""
        changes = [
            Change(
                c["seq"],
                parse_instant(c["at"], "at"),
                c["change"],
                c["op"],
                c["id"],
                c.get("version"),
                c["actor"],
                Record.model_validate(c["record"]) if "record" in c else None,
            )
            for c in data["changes"]
        ]
        return cls(changes, data.get("next"))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"changes": [c.to_json() for c in self.changes]}
        if self.next is not None:
            data["next"] = self.next
        return data

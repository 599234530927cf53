"""The ledger: an append-only log of every mutation, how any state is explained."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memstrata.domain.time import format_instant


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

"""The ledger: an append-only log of every mutation, how any state is explained."""

from __future__ import annotations

from dataclasses import dataclass


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

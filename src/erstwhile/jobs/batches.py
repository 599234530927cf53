"""The batch writer both ingestion jobs write through: ``import`` and ``mine``.

An ingestion job hands it *groups* — a line of a JSON Lines file, a turn of a
transcript, every change to one mined document — and it writes them in order,
``batch_size`` records (and invalidations) at a time, **one transaction per batch**
(:meth:`Service.ingest`). A group is never split across two batches, so a document
is re-mined whole or not at all, and a crash between batches leaves every group either
written or untouched: the database is the job's cursor.

A refusal only the store can decide (a key held by another record, an unknown
``supersedes`` id) stops the job at that batch and is raised with ``records[i]``
replaced by where the record came from, and with what was and was not written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from erstwhile.domain.errors import ErstwhileError, InvalidInput
from erstwhile.domain.records import Record, UpsertResult
from erstwhile.jobs.embed import Progress

DEFAULT_BATCH_SIZE = 500

Invalidation = tuple[str, int]  # (record id, instant in µs its validity ends)
Write = Callable[[list[Record], list[Invalidation]], UpsertResult]


def check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size must be a positive integer, got {batch_size!r}")


@dataclass
class BatchWriter:
    """Writes groups in order through ``write``, one transaction per batch.

    A record whose id is already in the pending batch starts a new batch first, so a
    later line becomes a later version. ``progress(done, total)`` is told the groups
    written after every batch."""

    write: Write
    label: str
    batch_size: int = DEFAULT_BATCH_SIZE
    total: int = 0
    progress: Progress | None = None
    ids: list[str] = field(default_factory=list)
    invalidated: int = 0
    warnings: list[str] = field(default_factory=list)
    batches: int = 0
    done: int = 0
    _records: list[Record] = field(default_factory=list)
    _wheres: list[str] = field(default_factory=list)
    _invalidations: list[Invalidation] = field(default_factory=list)
    _pending_ids: set[str] = field(default_factory=set)
    _groups: int = 0

    def __post_init__(self) -> None:
        check_batch_size(self.batch_size)

    def add(
        self,
        records: Sequence[tuple[Record, str]],
        invalidations: Sequence[Invalidation] = (),
    ) -> None:
        """Adds one group: records with where each came from, and ids to invalidate."""
        if any(record.id in self._pending_ids for record, _ in records):
            self.flush()
        for record, where in records:
            self._records.append(record)
            self._wheres.append(where)
            if record.id:
                self._pending_ids.add(record.id)
        self._invalidations.extend(invalidations)
        self._groups += 1
        if len(self._records) + len(self._invalidations) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self._groups:
            return
        if self._records or self._invalidations:
            try:
                result = self.write(self._records, self._invalidations)
            except ErstwhileError as error:
                raise self._located(error) from None
            self.ids += result.ids
            self.invalidated += len(self._invalidations)
            self.warnings += [w for w in result.warnings if w not in self.warnings]
            self.batches += 1
        self.done += self._groups
        self._records, self._wheres, self._invalidations, self._groups = [], [], [], 0
        self._pending_ids = set()
        if self.progress is not None:
            self.progress(self.done, self.total)

    def finish(self) -> None:
        """Writes what is pending; tells ``progress`` even when there was nothing."""
        if self._groups:
            self.flush()
        elif self.progress is not None and not self.batches:
            self.progress(self.done, self.total)

    def _located(self, error: ErstwhileError) -> ErstwhileError:
        """The same error, with ``records[i]`` replaced by where that record came from
        and what was and was not written."""
        wheres = self._wheres

        def where(match: re.Match[str]) -> str:
            index = int(match[1])
            return wheres[index] if index < len(wheres) else match[0]

        message = re.sub(r"records\[(\d+)\]", where, error.message)
        first = wheres[0] if wheres else "the start"
        written = len(self.ids)
        return type(error)(
            f"{self.label}: {message} — {written} record{'' if written == 1 else 's'} "
            f"before {first} {'was' if written == 1 else 'were'} written; "
            f"nothing from {first} on was"
        )

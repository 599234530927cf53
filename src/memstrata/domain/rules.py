"""Write rules every backend applies the same way: pure functions over records."""

from __future__ import annotations

from memstrata.domain.errors import InvalidInput, WriteConflict
from memstrata.domain.records import Record
from memstrata.domain.time import format_instant, from_us, to_us


def supersession_closure(old: Record, new: Record, field: str, now: int) -> Record | None:
    """The new version of ``old`` once ``new`` supersedes it: validity closed at
    ``new.valid_from`` and ``superseded_by`` set. ``None`` when ``new`` already closed
    it (a re-upsert, not a fork). Refuses forks, deleted records and a replacement
    that does not start later."""
    assert new.valid_from is not None and old.valid_from is not None
    if old.superseded_by == new.id:
        return None
    if old.superseded_by is not None:
        raise WriteConflict(
            f"{field}: {old.id!r} was already superseded by {old.superseded_by!r}; "
            "supersede the newest record of the chain instead (chains never fork)"
        )
    if old.deleted_at is not None:
        raise WriteConflict(f"{field}: {old.id!r} is deleted; it cannot be superseded")
    if new.valid_from <= old.valid_from:
        raise InvalidInput(
            f"valid_from of {new.id!r} ({format_instant(to_us(new.valid_from))}) must be later "
            f"than valid_from of the record it supersedes, {old.id!r} "
            f"({format_instant(to_us(old.valid_from))})"
        )
    closed_at = new.valid_from
    if old.valid_to is not None and old.valid_to < closed_at:
        closed_at = old.valid_to  # an earlier invalidation stands; never reopen it
    return old.model_copy(
        update={
            "valid_to": closed_at,
            "superseded_by": new.id,
            "updated_at": from_us(now),
            "version": (old.version or 0) + 1,
        }
    )

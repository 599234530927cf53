"""Instants and validity windows: the one temporal rule of erstwhile (SPEC §3).

Instants enter as RFC 3339 (any offset) or ``YYYY-MM-DD`` (midnight UTC) and leave as
RFC 3339 UTC with microseconds and a ``Z``. Inside, they are integer microseconds
since the epoch, so every backend compares them the same way.

Validity is the half-open range ``[valid_from, valid_to)``. A record overlaps the
window ``[start, end)`` when ``valid_from < end`` and (``valid_to`` is absent or
``valid_to > start``). Touching is not overlapping; a point ``t`` is ``[t, t+1µs)``.
Stores render this rule from :class:`Window`; nothing else restates it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.validation import quoted

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# RFC 3339 needs a date, a time and an offset; fromisoformat alone is more lenient.
_FINER = re.compile(r"(\.\d{6})\d+")
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)


def now_us() -> int:
    """The current instant, in microseconds since the epoch."""
    return time.time_ns() // 1000


def to_us(value: datetime) -> int:
    """An aware datetime as microseconds since the epoch (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def parse_instant(value: object, field: str) -> int:
    """Reads an instant given as RFC 3339 text, ``YYYY-MM-DD``, a datetime or a date."""
    if isinstance(value, bool):
        raise InvalidInput(f"{field} must be an RFC 3339 instant or YYYY-MM-DD, got a boolean")
    if isinstance(value, datetime):
        return to_us(value)
    if isinstance(value, date):
        return to_us(datetime(value.year, value.month, value.day, tzinfo=UTC))
    if isinstance(value, str):
        text = value.strip()
        try:
            if _DATE_ONLY.match(text):
                parsed = date.fromisoformat(text)
                return to_us(datetime(parsed.year, parsed.month, parsed.day, tzinfo=UTC))
            if _RFC3339.match(text):
                # Python keeps microseconds; trim finer digits instead of refusing them.
                trimmed = text.replace("z", "Z")
                if len(trimmed) > 27:  # more digits than microseconds can hold
                    trimmed = _FINER.sub(r"\1", trimmed)
                return to_us(datetime.fromisoformat(trimmed.replace("Z", "+00:00")))
        except ValueError:
            pass
        raise InvalidInput(
            f"{field} must be an RFC 3339 instant such as 2024-05-01T12:00:00Z "
            f"or a date YYYY-MM-DD, got {quoted(value)}"
        )
    raise InvalidInput(
        f"{field} must be an RFC 3339 instant or YYYY-MM-DD, got {type(value).__name__}"
    )


#: The first instants of the years 1000 and 10000, and what an epoch day's ordinal is off by.
_YEAR_1000, _YEAR_10000 = -30_610_224_000_000_000, 253_402_300_800_000_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


@lru_cache(maxsize=4096)
def _day_text(day: int) -> str:
    """``YYYY-MM-DD`` of the ``day``-th day after the epoch (a batch's instants share a few)."""
    return date.fromordinal(_EPOCH_ORDINAL + day).isoformat()


def format_instant(us: int) -> str:
    """RFC 3339, UTC, microsecond precision, ``Z``."""
    if not _YEAR_1000 <= us < _YEAR_10000:  # strftime does not pad the year (or fails)
        return from_us(us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # the time of day by arithmetic, the date once per day: a third of isoformat's cost
    day, rest = divmod(us, _DAY_US)
    seconds, micro = divmod(rest, 1_000_000)
    hour, seconds = divmod(seconds, 3600)
    minute, second = divmod(seconds, 60)
    return "%sT%02d:%02d:%02d.%06dZ" % (_day_text(day), hour, minute, second, micro)  # noqa: UP031


@dataclass(frozen=True, slots=True)
class Window:
    """The half-open validity window ``[start, end)`` a search or hop asks about."""

    start: int
    end: int

    @classmethod
    def point(cls, at: int) -> Window:
        return cls(at, at + 1)

    @classmethod
    def between(cls, start: int, end: int) -> Window:
        if start >= end:
            raise InvalidInput(
                "between.from must be earlier than between.until (the window is empty or reversed)"
            )
        return cls(start, end)

"""A tag or metadata condition of a search scope, as both SQL backends write it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Member:
    """A test on rows of ``table`` (``record_tags`` or ``record_meta``) of one
    namespace. ``test`` names the row's columns as ``{c}column``; ``on`` qualifies
    them. Each backend writes the test in its own dialect and places it (driving the
    scan, ``IN`` or ``EXISTS``)."""

    table: str
    test: str
    params: tuple[Any, ...]

    def on(self, alias: str) -> str:
        return self.test.format(c=f"{alias}.")

"""Sequences: the conversations and sessions records are said in, and the context a
record of one is embedded with.

A record names a sequence when its metadata holds ``session`` or ``conversation``
(what the conversation importer writes on every turn): its sequence is the pair of
the two values, a missing one matching only a missing one, within its namespace.
"Melanie: What was it?" means little without what was asked, so such a record is
embedded in context: its vector is the mean of two embeddings, of its content and of
the content of the record before it in its sequence followed by its content, joined
by a newline, normalised to unit length. A record with no record before it (the
first of its sequence) gets its content's embedding alone, as does a record that
names no sequence. The content is never changed.

The record before it is the sequence's live record (not deleted, not superseded, and
valid when it was said) that comes last before it by ``valid_from``, then by the order
records were first written: for a turn written as it happens, the turn written just
before it. A record revised later keeps its place (its first write), so a corrected
turn is embedded with the turn before it, never with the turns said after it; a record
that supersedes others is never embedded with them, and takes its sequence from the
first of them when it names none itself (as it inherits their metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: The metadata keys that name a sequence, outermost first.
SEQUENCE_KEYS = ("conversation", "session")


@dataclass(frozen=True)
class Place:
    """Where a record stands in its sequence: what the store needs to find the record
    before it. ``record_id`` is the record itself and ``replaces`` the records it
    supersedes: none of them is its context."""

    record_id: str
    conversation: str | None
    session: str | None
    valid_from: int
    replaces: tuple[str, ...] = ()


def sequence_of(metadata: Mapping[str, str]) -> tuple[str | None, str | None] | None:
    """The ``(conversation, session)`` a record's metadata names, or None."""
    conversation = metadata.get("conversation")
    session = metadata.get("session")
    if conversation is None and session is None:
        return None
    return conversation, session


def place_of(
    record_id: str, metadata: Mapping[str, str], valid_from: int, replaces: tuple[str, ...] = ()
) -> Place | None:
    """The record's place in its sequence, or None when it names none."""
    sequence = sequence_of(metadata)
    if sequence is None:
        return None
    return Place(record_id, sequence[0], sequence[1], valid_from, replaces)


def in_context(before: str, content: str) -> str:
    """The text a record is embedded with besides its own: the record before it, then it."""
    return f"{before}\n{content}"


def combine(own: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Rows of ``own`` (content alone) and ``joint`` (in context), averaged and
    normalised to unit length: the vectors a sequence's records are stored with."""
    mixed = np.asarray(own, dtype=np.float32) + np.asarray(joint, dtype=np.float32)
    norms = np.maximum(np.linalg.norm(mixed, axis=-1, keepdims=True), 1e-12)
    return (mixed / norms).astype(np.float32)

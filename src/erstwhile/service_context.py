"""Embedding in context: the one rule every write path applies to a record that names a
conversation or session (:mod:`erstwhile.domain.sequences`) — an upsert or ``add`` on
any interface, the conversation importer, and the embed job that fills a backlog.

A batch's records are placed in order: a record's "before" is the last earlier record
of the batch in its sequence (valid no later than it) when there is one at least as
late as the store's, else the store's. So turns written one at a time, in one batch,
or imported, get the same vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

import numpy as np

from erstwhile.domain.errors import NotFound
from erstwhile.domain.records import Record
from erstwhile.domain.sequences import Place, combine, in_context, place_of
from erstwhile.domain.time import to_us
from erstwhile.embedding.base import Embedder
from erstwhile.store.base import Store


def record_place(store: Store, namespace: str, record: Record, now: int) -> Place | None:
    """A record's place in its sequence (``valid_from`` unset: ``now``), or None. A
    record that supersedes others and sets no metadata has the first one's (as the
    store will give it: the revision inherits it)."""
    at = now if record.valid_from is None else to_us(record.valid_from)
    metadata = record.metadata
    if record.supersedes and "metadata" not in record.model_fields_set:
        with suppress(NotFound):  # else the write refuses it
            metadata = store.get(namespace, record.supersedes[0]).metadata
    return place_of(record.id, metadata, at, tuple(record.supersedes))


def contexts(store: Store, namespace: str, records: Sequence[Record], now: int) -> list[str | None]:
    """For each record, the record before it (its content) in its sequence, or None."""
    latest: dict[tuple[str | None, str | None], list[tuple[str, int, str]]] = {}
    out: list[str | None] = []
    for record in records:
        place = record_place(store, namespace, record, now)
        if place is None:
            out.append(None)
            continue
        key = (place.conversation, place.session)
        mine: tuple[int, str] | None = None  # the batch's own come after every stored one
        for record_id, at, content in latest.get(key, []):
            replaced = record_id in place.replaces
            if at <= place.valid_from and not replaced and (mine is None or at >= mine[0]):
                mine = (at, content)
        stored = store.before(namespace, place)
        if mine is not None and (stored is None or mine[0] >= stored[0]):
            out.append(mine[1])
        else:
            out.append(stored[1] if stored is not None else None)
        latest.setdefault(key, []).append((record.id, place.valid_from, record.content))
    return out


def embed_in_context(
    embedder: Embedder, contents: Sequence[str], befores: Sequence[str | None]
) -> np.ndarray:
    """The vectors of ``contents``, each embedded with the text before it when there is
    one (:func:`erstwhile.domain.sequences.combine`); raises ``ProviderFailed``."""
    own = embedder.embed_documents(list(contents))
    paired = [n for n, before in enumerate(befores) if before is not None]
    if not paired:
        return own
    joint = embedder.embed_documents([in_context(befores[n] or "", contents[n]) for n in paired])
    own[paired] = combine(own[paired], joint)
    return own

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

import numpy as np

from erstwhile.domain.records import Record
from erstwhile.domain.sequences import Place, combine, in_context, place_of
from erstwhile.domain.time import to_us
from erstwhile.embedding.base import Embedder
from erstwhile.store.base import Store


def record_place(record: Record, now: int) -> Place | None:
    """A record's place in its sequence (``valid_from`` unset: ``now``), or None."""
    at = now if record.valid_from is None else to_us(record.valid_from)
    return place_of(record.id, record.metadata, at)


def contexts(store: Store, namespace: str, records: Sequence[Record], now: int) -> list[str | None]:
    """For each record, the record before it (its content) in its sequence, or None."""
    latest: dict[tuple[str | None, str | None], list[tuple[int, str]]] = {}
    out: list[str | None] = []
    for record in records:
        place = record_place(record, now)
        if place is None:
            out.append(None)
            continue
        key = (place.conversation, place.session)
        mine: tuple[int, str] | None = None  # the batch's own come after every stored one
        for at, content in latest.get(key, []):
            if at <= place.valid_from and (mine is None or at >= mine[0]):
                mine = (at, content)
        stored = store.before(namespace, place)
        if mine is not None and (stored is None or mine[0] >= stored[0]):
            out.append(mine[1])
        else:
            out.append(stored[1] if stored is not None else None)
        latest.setdefault(key, []).append((place.valid_from, record.content))
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

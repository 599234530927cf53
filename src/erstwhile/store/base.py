"""The Store protocol: all the service may call, and what each method promises.

One implementation (:class:`erstwhile.store.sql.store.SqlStore`) serves both
backends, ``sqlite`` (embedded default) and ``postgres``, through a dialect each.
Instants are integer microseconds since the epoch; the service passes ``now`` so
one call has one clock. Every mutation runs in one transaction (all or nothing) and
appends to the ledger, attributed to ``actor``. A record that does not exist is
:class:`~erstwhile.domain.errors.NotFound`; a database that cannot be used is
:class:`~erstwhile.domain.errors.StorageUnavailable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from erstwhile.domain.auth import Token
from erstwhile.domain.ledger import ChangesPage, LedgerEntry
from erstwhile.domain.records import Record
from erstwhile.domain.search import ExpireRequest, SearchRequest
from erstwhile.domain.sequences import Place
from erstwhile.domain.time import Window
from erstwhile.store.sql.graph import Graph
from erstwhile.store.sql.maintenance import Finding, Read


class SemanticHits(list[tuple[Record, float]]):
    """The vector lane's hits, best first, and the index that found them: None when
    the scope was scored exactly, else its name (``"hnsw"``, ``"ivf"``), which each hit
    carries in its ``semantic`` signal."""

    found_by: str | None = None


class LexicalHits(list[tuple[Record, float]]):
    """The lexical lane's hits, best first, and what they were matched against: the
    query's distinct ``terms`` in the namespace's text-search ``language`` (fusion
    counts how many of them each hit's content holds)."""

    terms: tuple[str, ...] = ()
    language: str = ""


class Store(Protocol):
    backend: str
    """"sqlite" or "postgres"."""
    request_threads: int
    """How many requests one server process should handle at once: 1 where a request
    computes in the process (SQLite: Python and numpy under one interpreter lock, so
    requests side by side only slow each other), more where it waits on a database
    server (PostgreSQL)."""
    #: the knowledge graph, one backend-independent implementation (store/sql/graph.py)
    graph: Graph

    def close(self) -> None:
        """Releases every connection; the store is not used again."""
        ...

    # writes
    def upsert(
        self,
        namespace: str,
        records: Sequence[Record],
        *,
        now: int,
        actor: str,
        embedder_id: str | None = None,
        invalidations: Sequence[tuple[str, int]] = (),
        units: np.ndarray | None = None,
    ) -> list[tuple[str, int]]:
        """Creates or revises each record (in order, as one transaction) by the
        revision rules of :mod:`erstwhile.domain.rules`; a vector given with a record
        is stored for ``embedder_id`` (``units``: every record's vector as its checked
        unit row, :func:`~erstwhile.domain.vectors.unit_rows`, in the records' order).
        Then invalidates each ``(id, at)`` of ``invalidations``, in the same
        transaction (an ingestion batch: records that changed and records that
        vanished commit together or not at all). Returns (id, version) per record."""
        ...

    def invalidate(self, namespace: str, record_id: str, at: int, *, now: int, actor: str) -> int:
        """Ends the record's validity at ``at`` (never extends it); returns the
        version now current."""
        ...

    def delete(self, namespace: str, record_id: str, *, hard: bool, now: int, actor: str) -> None:
        """A tombstone (soft: history kept) or every trace but the ledger entry
        (hard)."""
        ...

    def verify(self, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str) -> int:
        """Marks the record verified by ``reviewer``; returns the current version."""
        ...

    def expire(self, namespace: str, request: ExpireRequest, *, now: int, actor: str) -> int:
        """Applies the request's action to at most ``max_rows`` matching records,
        oldest first; returns how many."""
        ...

    def set_embedding(
        self,
        namespace: str,
        record_id: str,
        embedder_id: str,
        vector: np.ndarray,
        *,
        now: int,
        actor: str,
    ) -> None:
        """Stores the record's vector for ``embedder_id`` (a ledger entry, no new
        version)."""
        ...

    # reads
    def get(
        self,
        namespace: str,
        record_id: str,
        version: int | None = None,
        known_at: int | None = None,
    ) -> Record:
        """The current record, the given version of it, or its version as known at
        record time ``known_at``."""
        ...

    def versions(self, namespace: str, record_id: str) -> list[int]:
        """Every version number the record has had, ascending."""
        ...

    def history(
        self,
        namespace: str,
        record_id: str,
        known_at: int | None = None,
        *,
        versions: bool = False,
    ) -> list[Record]:
        """Every record of the supersession chain through ``record_id``, oldest
        first; as known at record time ``known_at`` when given. With ``versions``,
        every stored version of each of them, in record-time order, each with its
        record-time range (``updated_at`` .. ``known_until``)."""
        ...

    def changes(
        self, namespace: str, since: int, until: int, *, after: int | None, limit: int
    ) -> ChangesPage:
        """What was recorded in ``[since, until)`` (record time), oldest first, a page
        of ``limit`` after ledger seq ``after``."""
        ...

    def origin_records(self, namespace: str, source: str) -> list[Record]:
        """Every record whose ``origin.source`` is ``source``, in every state but
        hard-deleted (current, superseded, invalidated, soft-deleted), oldest first,
        without payloads: what mining compares a folder with."""
        ...

    def lexical(
        self, namespace: str, request: SearchRequest, window: Window | None, limit: int
    ) -> list[tuple[Record, float]]:
        """The best ``limit`` in-scope records by BM25 over content (higher is better,
        ties by id), with the namespace's own statistics; a :class:`LexicalHits` that
        names the query's terms and the language they were matched in."""
        ...

    def text_search(self, namespace: str) -> str:
        """The text-search language the namespace's records are indexed in."""
        ...

    def set_text_search(self, namespace: str, language: str) -> bool:
        """Binds the namespace to a text-search language, re-indexing its records if
        they were indexed in another (all or nothing). Returns whether it changed."""
        ...

    def semantic(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> tuple[list[tuple[Record, float]], int]:
        """The best ``limit`` in-scope records by cosine to ``query`` (ties by id),
        and how many in-scope records have no vector for ``embedder_id`` yet."""
        ...

    # derived vectors (rowid = the backend's internal integer key of a record)
    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        """The stored vectors of the named records, by id."""
        ...

    def backlog(self, namespace: str, embedder_id: str, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` records with no vector for ``embedder_id``:
        (rowid, content hash, content)."""
        ...

    def backlog_count(self, namespace: str, embedder_id: str) -> int:
        """How many records of the namespace have no vector for ``embedder_id``."""
        ...

    def store_vectors(
        self, namespace: str, embedder_id: str, items: Sequence[tuple[int, str, np.ndarray]]
    ) -> int:
        """Stores derived vectors of the namespace's (rowid, content hash) pairs whose
        content is still that hash; returns how many were stored."""
        ...

    def places(self, namespace: str, rowids: Sequence[int]) -> dict[int, Place]:
        """The places in their sequences of the records ``rowids`` that name one
        (:mod:`erstwhile.domain.sequences`), by rowid."""
        ...

    def before(self, namespace: str, place: Place) -> tuple[int, str] | None:
        """``(valid_from, content)`` of the record before ``place`` in its sequence
        (:mod:`erstwhile.domain.sequences`), or None when it is the first."""
        ...

    def clear_vectors(self, namespace: str, embedder_id: str) -> int:
        """Drops the namespace's vectors for ``embedder_id``; returns how many."""
        ...

    # jobs (each a dict of JOB_FIELDS; ``owner`` is "host:pid" of the process running it)
    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int:
        """Records a running job; returns its id."""
        ...

    def job_update(
        self,
        job_id: int,
        *,
        state: str,
        done: int,
        error: str | None,
        now: int,
        usage: dict[str, Any] | None = None,
        stopped: str | None = None,
    ) -> None:
        """Sets a job's state, progress and error; its provider figures (``usage``, a
        JSON object) and why it stopped early (``stopped``) when given (None keeps
        what the row holds)."""
        ...

    def jobs(
        self,
        namespace: str | None = None,
        *,
        state: str | None = None,
        job_id: int | None = None,
        last: int | None = None,
    ) -> list[dict[str, Any]]:
        """Job rows matching every filter given, oldest first (only the ``last``
        ones if asked)."""
        ...

    # tokens
    def token_create(self, token: Token) -> None:
        """Stores a token (its secret's digest only)."""
        ...

    def tokens(self) -> list[Token]:
        """Every token, oldest first."""
        ...

    def token_by_digest(self, token_digest: str) -> Token | None:
        """The token whose secret has this digest, if any."""
        ...

    def token_disable(self, token_id: str) -> bool:
        """Disables a token; False when there is no such token."""
        ...

    # inspection
    def ledger(
        self, namespace: str | None = None, record_id: str | None = None
    ) -> list[LedgerEntry]:
        """Every ledger entry (of one namespace, and of one record id in it, if given),
        in order."""
        ...

    def record_counts(self, namespace: str, now: int) -> dict[str, int]:
        """How many records the namespace holds (``records``: every id, tombstones
        included) and how many of them are ``current`` (valid at ``now``, not deleted),
        ``future`` (not yet valid: ``valid_from`` after ``now``), ``superseded``,
        ``invalidated`` (closed with no successor) and ``deleted``; each record is in
        exactly one of those five, so they add up to ``records``."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace that has been written to, by name."""
        ...

    # maintenance (backup, export, import, check: see store/sql/maintenance.py)
    def reader(self) -> AbstractContextManager[Read]:
        """Reads (``?`` placeholders, the shared tables) that all see one committed state."""
        ...

    def restore(
        self,
        records: Sequence[Sequence[Record]],
        *,
        now: int,
        actor: str,
        hard_deleted: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Writes exported records (each its versions, server fields kept) and the ids
        an export says were hard-deleted, in one transaction, ledgered as ``import``."""
        ...

    def backup(self, path: str) -> None:
        """A consistent copy of the live store at ``path`` (a new file), where the
        backend can make one."""
        ...

    def integrity(self) -> list[Finding]:
        """What the backend itself can verify of its files and indexes."""
        ...

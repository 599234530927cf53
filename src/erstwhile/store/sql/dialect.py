"""What a backend tells the shared SQL store: only what truly differs between them.

The store (:mod:`erstwhile.store.sql.store`) and its writes, scope rendering,
migration runner and row mapping are written once, with ``?`` placeholders. A
dialect supplies the connection (``db``), the wording two engines spell apart
(row locks, text equality, membership tests, the join that fixes a plan), the
vector lane, DDL, and the translation of its driver's errors into
:class:`StorageUnavailable`. The lexical lane is shared (:mod:`erstwhile.store.sql.lexical`).

A transaction (``Tx``) is whatever ``db`` hands out: an object with
``execute(sql, params)`` (returning a cursor: ``fetchone``, ``fetchall``,
iteration, ``rowcount``) and ``executemany(sql, rows)`` that accepts ``?``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np

from erstwhile.domain.records import Record
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import Window
from erstwhile.store.sql.maintenance import Finding

T = TypeVar("T")
#: A connection inside a transaction, as the dialect's ``db`` hands it out.
Tx = Any


#: The tail's postings of a query's terms: term -> (records, tfs, lengths), arrays
#: (int64, float64, float64).
TailPostings = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


class LexicalTail(Protocol):
    """Where a dialect keeps the lexical documents not merged yet (``lexical_tail``,
    SQLite's: :class:`erstwhile.store.sqlite.lexical_tail.Tail`), as the shared lexical
    lane (:mod:`erstwhile.store.sql.lexical`) uses it."""

    #: Runs a callable once the current write commits (None: the store has no copy
    #: of the tail to keep up, and merges no tail beside the writers).
    on_commit: Callable[[Callable[[], None]], None] | None
    #: Asks for a merge beside the writers, if the store makes them.
    merge: Callable[[], None] | None

    def due(self, rows: int, tx: Tx, *, over: int = 1) -> bool:
        """Whether a tail of ``rows`` rows is due to be merged (``over`` times over)."""
        ...

    def merge_all(self, d: Dialect, tx: Tx) -> None:
        """Merges every document of the tail inside ``tx`` (a write's)."""
        ...

    def postings(self, tx: Tx, namespace: str, terms: Iterable[str]) -> TailPostings:
        """The tail's postings of ``terms`` in ``namespace``, as of ``tx``'s snapshot."""
        ...

    def written(
        self,
        namespace: str,
        rows: Sequence[tuple[int, tuple[Counter[str], int] | None]],
        last: int,
        first_of_tail: int,
        merged: bool,
    ) -> None:
        """A committed write appended ``rows`` (record, its document) to the tail."""
        ...

    def merged(self) -> None:
        """A merge of this process's has committed."""
        ...


class Database(Protocol):
    """A dialect's connections: reads, consistent snapshots, and retried writes."""

    def read(self) -> AbstractContextManager[Tx]:
        """A connection for reads whose statements need not agree with each other."""
        ...

    def snapshot(self) -> AbstractContextManager[Tx]:
        """A read transaction: every statement inside sees one committed state."""
        ...

    def write(self, work: Callable[[Tx], T]) -> T:
        """Runs ``work`` in one write transaction (again, from the start, when the
        engine reports that it lost a race) and returns what it returned."""
        ...

    def close(self) -> None: ...


class WriterBeside(Database, Protocol):
    """A database where a thread works beside the writers (SQLite's lexical merge):
    it can start at the writers' next commit, and write one statement that holds the
    write lock for its own time alone."""

    def next_commit(self, timeout: float) -> None:
        """Waits until a write of the process commits, or ``timeout`` seconds."""
        ...

    def write_one(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs one statement as a write transaction of its own; its row count."""
        ...


@dataclass(frozen=True)
class Lane:
    """One lane's part of a search: the namespace, the request, its time window
    (None: include historical), how many hits the lane returns, and the record time
    it is put back to (``known_at``; None: now)."""

    namespace: str
    request: SearchRequest
    window: Window | None
    limit: int
    known_at: int | None = None


class Dialect(ABC):
    """One backend's differences from the shared SQL store."""

    #: ``Store.backend``: "sqlite" or "postgres".
    name: str
    #: ``Store.request_threads``.
    request_threads: int
    db: Database
    #: Appended to a SELECT whose rows a write goes on to change, and to one whose
    #: rows must not change under it.
    lock_for_update: str = ""
    lock_for_share: str = ""
    #: The constant true condition.
    true: str = "1"
    #: How a tag or metadata member is tested against a record: ``rowid IN (…)``
    #: or a correlated ``EXISTS (…)``.
    membership: Literal["in", "exists"] = "in"
    #: Where a write's documents wait as ``lexical_docs`` rows alone, with no postings,
    #: until merged into ``lexical_postings`` (the tail, ``lexical_tail``): the store's
    #: in-process copy of them, which a search scores them from
    #: (:class:`LexicalTail`), or None where a write's postings go straight to
    #: ``lexical_postings``.
    lexical_tail: LexicalTail | None = None
    #: Whether each record's terms are kept as one row of ``lexical_docs`` (also where
    #: there is a tail), by which its postings are found instead of by an index on
    #: record (:func:`erstwhile.store.sql.lexical.documented`).
    lexical_documents = False
    #: Whether ``lexical_postings`` is keyed by the merge that wrote each posting
    #: (``seg``, after the namespace), the merges of a namespace listed in
    #: ``lexical_segments``: a merge then appends its postings at the key's end instead
    #: of among every term's (:func:`erstwhile.store.sql.lexical.postings_of`).
    lexical_segments = False

    def every_shard(self, tx: Tx) -> None:
        """Says that ``tx``'s statements read every namespace on purpose (an
        inspection); where tables are distributed by namespace they reach every shard."""
        return  # one server holds every namespace: nothing to say

    # -- wording ------------------------------------------------------------------

    def unindexed(self, column: str) -> str:
        """``column`` written so the planner will not drive a scan by its index
        (where the engine has such a spelling; otherwise ``column``)."""
        return column

    def by_index(self, table: str, index: str) -> str:
        """``table`` read by ``index`` where the
        engine can be told, otherwise ``table``: without statistics SQLite ranges over
        a namespace's whole primary key for one record's rows."""
        return table

    def text_equals(self, column: str, value: str) -> tuple[str, list[Any]]:
        """``column`` equals the text ``value``, as an index on the column can answer."""
        return f"{column} = ?", [value]

    def text_in(self, column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``."""
        return self.in_list(column, values)

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (any number of them)."""
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)

    def truncated(self, expression: str) -> str:
        """The float ``expression`` cut toward zero to a whole number."""
        return f"CAST({expression} AS INTEGER)"

    def json_text(self, column: str, key: str) -> str:
        """The text value of the top-level ``key`` of the JSON object in ``column``
        (``key`` is a fixed name of the code, never input)."""
        return f"json_extract({column}, '$.{key}')"

    @abstractmethod
    def records_join(
        self,
        alias: str,
        driver: str,
        *,
        table: str = "records",
        column: str = "rowid",
        index: str | None = None,
    ) -> str:
        """The join from scope rows aliased ``driver`` to their records as ``alias``
        (or to the rows of ``table`` whose ``column`` holds the record's rowid, by
        ``index`` where the engine can be told)."""

    @abstractmethod
    def has_vector(self, vectors: str, records: str) -> str:
        """The condition that vector row ``vectors`` is a live vector of ``records``
        for the embedder bound to the next ``?``."""

    # -- writes ---------------------------------------------------------------------

    def reserve_rowids(self, tx: Tx, count: int) -> list[int]:
        """Rowids for ``count`` records about to be inserted, drawn ahead (or none,
        when the insert itself assigns one)."""
        return []

    def insert_rows(
        self, tx: Tx, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
        suffix: str = "", *, change: int = 0, distinct: bool = False,
    ) -> None:  # fmt: skip
        """Inserts rows into one of the store's own tables (names from the code, never
        input; ``suffix``: an ON CONFLICT clause, the same on every call for a table).
        A dialect may hold them back until the transaction's next other statement or
        its end, and send many records' rows as one statement; ``change``: the rows
        are those of the k-th change of their record in this transaction (k from 0),
        sent after the held-back statements of its earlier changes; ``distinct``: the
        rows meet no conflict among themselves (nor with other rows the transaction
        inserts into the table), so a dialect may send many in one statement."""
        placeholders = ", ".join("?" for _ in columns)
        tx.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders}){suffix}", rows
        )

    def hold_language(  # noqa: B027 - a hook
        self, tx: Tx, namespace: str, *, exclusive: bool = False
    ) -> None:
        """Holds the namespace's text-search language for the rest of the transaction:
        shared by its writers, which then write side by side, or ``exclusive`` for a
        change of it (a re-index), which waits for them and they for it. Nothing where
        the engine has one writer at a time (SQLite)."""

    def add_term_counts(self, tx: Tx, namespace: str, changed: Sequence[tuple[str, int]]) -> None:
        """Adds each ``(term, delta)`` (terms distinct, in order) to the namespace's
        ``lexical_terms`` counts, a row made for a term it has none of yet; where rows
        lock, each term's row is locked in the terms' order (so two writers never wait
        for each other's terms in a cycle) until the transaction ends."""
        self.insert_rows(
            tx, "lexical_terms", ("namespace", "term", "df"),
            [(namespace, term, delta) for term, delta in changed],
            " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df",
        )  # fmt: skip

    @abstractmethod
    def insert_record(self, tx: Tx, rowid: int | None, values: dict[str, Any]) -> int:
        """Inserts a records row (``values``: :func:`~erstwhile.store.sql.rows.row_values`);
        returns its rowid."""

    @abstractmethod
    def update_record(self, tx: Tx, rowid: int, values: dict[str, Any]) -> None:
        """Rewrites a records row."""

    @abstractmethod
    def store_vector(
        self, tx: Tx, namespace: str, rowid: int, embedder_id: str, unit: np.ndarray
    ) -> None:
        """Stores (or replaces) the record's unit-length vector for ``embedder_id``."""

    def store_units(
        self, tx: Tx, namespace: str, rowids: Sequence[int], embedder_id: str, units: np.ndarray
    ) -> None:
        """Stores row i of ``units`` (checked, at unit length) as the vector of record
        ``rowids[i]`` for ``embedder_id``, as :meth:`store_vector` does each."""
        for rowid, unit in zip(rowids, units, strict=True):
            self.store_vector(tx, namespace, rowid, embedder_id, unit)

    def vectors_alone(self, tx: Tx, rowids: Sequence[int]) -> None:  # noqa: B027 - a hook
        """Records that the vectors of these records were written in ``tx`` without
        their record rows (the embed job's): a backend whose in-process copies follow
        the record rows' changes logs them (SQLite's ``scope_log``); else nothing."""

    @abstractmethod
    def withdraw_vectors(
        self, tx: Tx, namespace: str, *, rowid: int | None = None, embedder_id: str | None = None
    ) -> int:
        """Takes away a record's vectors (``rowid``) or a namespace's vectors of one
        embedder; returns how many."""

    @abstractmethod
    def keep_vectors(self, tx: Tx, namespace: str, rowid: int, content_hash: str) -> None:
        """Copies the record's vectors into ``past_vectors`` under ``content_hash`` (the
        content they were derived from, which the record is about to stop holding)."""

    def replace_later(
        self, tx: Tx, namespace: str, rowid: int, known_to: int,
        values: dict[str, Any], change: int, columns: Sequence[str] | None = None,
    ) -> bool:  # fmt: skip
        """Replaces the records row ``rowid`` with ``values`` as ``Writes.save`` does
        it (its past copy, the row rewritten, its scope rows removed), held back like
        inserted rows (``change``: the record's k-th change in this transaction, as for
        :meth:`insert_rows`), or (False) does nothing: the caller does it now.
        ``columns``: the only columns whose values differ from the row as stored (None:
        any may), which alone need writing."""
        return False

    def claim_key(self, tx: Tx, namespace: str, key: str) -> None:  # noqa: B027 - a hook
        """Serialises this transaction with any other that claims ``key`` (nothing to
        do where a write transaction already excludes every other writer)."""

    def forget_record(self, tx: Tx, namespace: str, rowid: int) -> None:  # noqa: B027 - a hook
        """Before a record's row is deleted (a hard delete): removes the rows that
        point at it which no foreign key cascades from (none where every one does)."""

    def wrote(self, rows: int) -> None:  # noqa: B027 - a hook
        """Called after a write of ``rows`` rows has committed."""

    # -- lanes ----------------------------------------------------------------------

    @abstractmethod
    def semantic(
        self, lane: Lane, embedder_id: str, query: np.ndarray
    ) -> tuple[list[tuple[Record, float]], int]:
        """The vector lane: the best ``limit`` in-scope records by cosine (ties by id)
        and how many in-scope records have no vector yet."""

    @abstractmethod
    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        """The stored vectors of the named records, by id (records without one left out)."""

    def build_vector_index(self, dimensions: int) -> None:  # noqa: B027 - a hook
        """Builds the vector index of one dimension now, where the lane has one."""

    #: Whether :meth:`scope_test` may answer (a lane then reads in one snapshot).
    has_scope_copy = False

    def scope_test(
        self, tx: Tx, namespace: str, request: SearchRequest, window: Window | None
    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """Where an in-process scope copy decides this search's scope (inside ``tx``, a
        snapshot): a test of rowids, returning those in scope (None: it cannot decide
        them after all). None where the dialect has no copy or it is not ready."""
        return None

    # -- maintenance ----------------------------------------------------------------

    def scrub(self) -> None:  # noqa: B027 - a hook, not abstract
        """After a hard delete has committed: lets go of old images of its pages."""

    @abstractmethod
    def backup(self, path: str) -> None:
        """A consistent copy of the live store at ``path`` (a new file), or a refusal
        that says how to back this engine up."""

    @abstractmethod
    def integrity(self) -> list[Finding]:
        """What the engine itself can verify of its files, indexes and vectors."""

    def close(self) -> None:
        self.db.close()


def chunks(values: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``values`` in runs of at most ``size``."""
    for start in range(0, len(values), size):
        yield values[start : start + size]

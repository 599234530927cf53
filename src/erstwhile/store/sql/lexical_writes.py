"""The lexical lane's writes (:mod:`erstwhile.store.sql.lexical`): one transaction's
changes to one namespace's postings, documents and counts, and the postings of a
content a record held before (for ``known_at`` searches)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from erstwhile.domain.words import DEFAULT_LANGUAGE, term_counts
from erstwhile.store.sql.dialect import Dialect, Tx, chunks
from erstwhile.store.sql.lexical import (
    DOCUMENT_COLUMNS,
    DOCUMENTS,
    MAIN,
    PENDING,
    POSTING_COLUMNS,
    TAIL,
    TAIL_ENDS,
    Document,
    documented,
    in_segments,
    packed,
)

_FIRST = itemgetter(0)
_TERM = itemgetter(1)


def stored_document(tx: Tx, namespace: str, rowid: int) -> Document | None:
    """The record's document as :data:`DOCUMENTS` holds it, if it has one."""
    row = tx.execute(
        f"SELECT terms, length FROM {DOCUMENTS} WHERE namespace = ? AND record = ?",
        (namespace, rowid),
    ).fetchone()
    return None if row is None else (Counter(str(row[0]).split()), int(row[1]))


@dataclass
class LexicalWrites:
    """One transaction's changes to one namespace's lexical rows.

    A write first holds the namespace's language (``Dialect.hold_language``: shared by
    its writers, so the language cannot change under them, while they write side by
    side). Postings of new documents wait in memory and every count is a delta until
    :meth:`flush`, at the write's end, which writes them once: the term counts, terms in
    sorted order, then the namespace's ``lexical_stats`` row. Where rows lock, those
    rows are the only ones writers of a namespace share, each locked from that update
    to the commit: the counts add up exactly, in turn, and a search reads the counts
    of the documents its snapshot sees. Terms before the statistics and each in the same
    order, so two transactions never wait for each other's in a cycle."""

    d: Dialect
    tx: Tx
    namespace: str
    _language: str | None = None
    _pending: dict[int, Document] = field(default_factory=dict)
    _df: Counter[str] = field(default_factory=Counter)
    _documents: int = 0
    _length: int = 0
    #: Records whose document went to or left the tail (or whose merged one went).
    _tailed: set[int] = field(default_factory=set)

    def language(self, *, exclusive: bool = False) -> str:
        """The namespace's language, held for the rest of the transaction (``exclusive``:
        by a change of it; the first call decides)."""
        if self._language is None:
            self.d.hold_language(self.tx, self.namespace, exclusive=exclusive)
            read = "SELECT language FROM lexical_stats WHERE namespace = ?"
            row = self.tx.execute(read, (self.namespace,)).fetchone()
            if row is None:  # the namespace's first write (an insert that met the row
                # would wait for a writer that is adding to its counts: only when new)
                self.tx.execute(
                    "INSERT INTO lexical_stats (namespace, language, documents, length)"
                    " VALUES (?, ?, 0, 0) ON CONFLICT (namespace) DO NOTHING",
                    (self.namespace, DEFAULT_LANGUAGE),
                )
                row = self.tx.execute(read, (self.namespace,)).fetchone()
            self._language = str(row[0])
        return self._language

    def document(self, content: str) -> Document:
        return term_counts(content, self.language())

    def add(self, rowid: int, document: Document) -> None:
        """A new record's document."""
        self._documents += 1
        self._put(rowid, document)

    def replace(self, rowid: int, document: Document) -> None:
        """A record's new content."""
        self._take(rowid)
        self._put(rowid, document)

    def remove(self, rowid: int) -> None:
        """A record removed (hard delete)."""
        self.language()  # held before the counts change
        self._documents -= 1
        self._take(rowid)

    def keep(self, rowid: int, content_hash: str) -> None:
        """The record's content (of hash ``content_hash``) is about to be replaced:
        its postings are kept for ``known_at`` searches (``lexical._known``)."""
        pending = self._pending.get(rowid)
        if pending is not None:  # written in this transaction, not in the table yet
            insert_postings(self.tx, self.namespace, {rowid: pending}, content_hash=content_hash)
            return
        if documented(self.d):
            stored = stored_document(self.tx, self.namespace, rowid)
            if stored is not None:
                insert_postings(self.tx, self.namespace, {rowid: stored},
                                 content_hash=content_hash)  # fmt: skip
            return
        self.tx.execute(
            "INSERT INTO past_postings (namespace, term, record, content_hash, tf, length)"
            f" SELECT namespace, term, record, ?, tf, length FROM {MAIN}"
            " WHERE namespace = ? AND record = ? ON CONFLICT DO NOTHING",
            (content_hash, self.namespace, rowid),
        )

    def _put(self, rowid: int, document: Document) -> None:
        counts, length = document
        self._pending[rowid] = document
        if self.d.lexical_tail is None:  # a tail's documents count at their merge
            self._df.update(counts.keys())
        self._length += length

    def _take(self, rowid: int) -> None:
        pending = self._pending.pop(rowid, None)
        if pending is not None:
            counts, length = pending
            terms: Iterable[str] = counts.keys() if self.d.lexical_tail is None else ()
        elif documented(self.d):
            stored = stored_document(self.tx, self.namespace, rowid)
            terms, length = [], 0
            if stored is not None:
                terms, length = list(stored[0]), stored[1]
                self.tx.execute(
                    f"DELETE FROM {DOCUMENTS} WHERE namespace = ? AND record = ?",
                    (self.namespace, rowid),
                )
            if self.d.lexical_tail is not None:
                self._tailed.add(rowid)  # a copy of the tail learns it is gone
            merged = 0
            segments = in_segments(self.d.lexical_segments, "", "?")
            by_merge = [self.namespace] if segments else []  # the IN's namespace
            for chunk in chunks(sorted(terms), 500):
                test, params = self.d.in_list("term", chunk)
                merged += self.tx.execute(
                    f"DELETE FROM {MAIN} WHERE namespace = ?{segments} AND {test} AND record = ?",
                    [self.namespace, *by_merge, *params, rowid],
                ).rowcount
                if segments:  # copied by a merge not listed yet: in no df
                    self.tx.execute(
                        f"DELETE FROM {MAIN} WHERE namespace = ? AND seg IN (SELECT seg FROM"
                        f" {PENDING} WHERE namespace = ?) AND {test} AND record = ?",
                        [self.namespace, self.namespace, *params, rowid],
                    )
            if not merged:  # a document of the tail: in no df yet
                terms = []
        else:
            rows = self.tx.execute(
                f"SELECT term, length FROM {MAIN} WHERE namespace = ? AND record = ?",
                (self.namespace, rowid),
            ).fetchall()
            terms = [row[0] for row in rows]
            length = int(rows[0][1]) if rows else 0
            self.tx.execute(
                f"DELETE FROM {MAIN} WHERE namespace = ? AND record = ?", (self.namespace, rowid)
            )
        self._df.subtract(terms)
        self._length -= length

    def flush(self) -> None:
        """Writes the documents (or postings) and counts this transaction changed."""
        ns = self.namespace
        written = self._pending
        if self.d.lexical_tail is not None:
            self._tailed.update(written)
        insert_postings(self.tx, ns, written, self.d)
        self._pending = {}
        changed = sorted((term, delta) for term, delta in self._df.items() if delta)
        if changed:
            self.d.add_term_counts(self.tx, ns, changed)
            gone = [term for term, delta in changed if delta < 0]
            for chunk in chunks(gone, 500):
                # a term no record holds any more leaves no trace of the words it was
                test, params = self.d.in_list("term", chunk)
                self.tx.execute(
                    f"DELETE FROM lexical_terms WHERE namespace = ? AND {test} AND df <= 0",
                    [ns, *params],
                )
        if self._documents or self._length:
            self.tx.execute(
                "UPDATE lexical_stats SET documents = documents + ?, length = length + ?"
                " WHERE namespace = ?",
                (self._documents, self._length, ns),
            )
        self._df.clear()
        self._documents = self._length = 0
        if self._tailed:
            self._append(written)

    def _append(self, written: dict[int, Document]) -> None:
        """Appends the changed records to the tail, has it merged when due (beside the
        writers where the store merges so, else here), and has the process's copy of
        the tail take the documents once the write commits."""
        tail = self.d.lexical_tail
        assert tail is not None
        records = sorted(self._tailed)
        self._tailed.clear()
        self.d.insert_rows(self.tx, TAIL, ("record",), [(r,) for r in records], distinct=True)
        (first, last) = self.tx.execute(TAIL_ENDS).fetchone()
        held = int(last) - int(first) + 1
        due = tail.due(held, self.tx)
        ask = tail.merge if tail.on_commit is not None else None  # a merge beside them
        # a merge beside the writers that has not come (the writers leave it no turn,
        # or another process holds the file) is made here once the tail is twice due
        merged = due and (ask is None or tail.due(held, self.tx, over=2))
        ns = self.namespace
        if merged:
            tail.merge_all(self.d, self.tx)
        if tail.on_commit is not None:
            rows = [(r, written.get(r)) for r in records]
            tail.on_commit(lambda: tail.written(ns, rows, int(last), int(first), merged))
            if due and not merged and ask is not None:
                tail.on_commit(ask)


def insert_postings(
    tx: Tx,
    namespace: str,
    documents: dict[int, Document],
    d: Dialect | None = None,
    content_hash: str | None = None,
) -> int:
    """Postings of current contents (through the write's dialect ``d`` when given), or
    (``content_hash``) of a past one. Returns how many rows."""
    if not documents:
        return 0
    if content_hash is None:
        if d is not None and d.lexical_tail is not None:  # the tail's: documents alone
            docs = document_rows(namespace, documents)
            d.insert_rows(tx, DOCUMENTS, DOCUMENT_COLUMNS, docs, distinct=True)
            return 0
        rows = [
            (namespace, term, rowid, tf, length)
            for rowid, (counts, length) in sorted(documents.items(), key=_FIRST)
            for term, tf in counts.items()
        ]
        if not rows:
            return 0
        # in the key's order (term, record), each landing beside the last: made in
        # record order, a stable sort by term alone (a third of the tuple key's time)
        rows.sort(key=_TERM)
        if d is not None:  # a write's postings, as its dialect inserts rows
            d.insert_rows(tx, MAIN, POSTING_COLUMNS, rows)
            if documented(d):
                d.insert_rows(tx, DOCUMENTS, DOCUMENT_COLUMNS, document_rows(namespace, documents))
        else:
            tx.executemany(
                f"INSERT INTO {MAIN} ({', '.join(POSTING_COLUMNS)}) VALUES (?, ?, ?, ?, ?)", rows
            )
        return len(rows)
    past = [
        (namespace, term, rowid, content_hash, tf, length)
        for rowid, (counts, length) in documents.items()
        for term, tf in counts.items()
    ]
    tx.executemany(
        "INSERT INTO past_postings (namespace, term, record, content_hash, tf, length)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        past,
    )
    return len(past)


def document_rows(namespace: str, documents: dict[int, Document]) -> list[tuple[Any, ...]]:
    """:data:`DOCUMENTS` rows of ``documents`` (those with terms: the others have no
    postings to find)."""
    return [
        (rowid, namespace, packed(counts), length)
        for rowid, (counts, length) in documents.items()
        if counts
    ]

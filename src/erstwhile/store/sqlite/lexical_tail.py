"""SQLite's tail of the lexical lane (:data:`erstwhile.store.sql.lexical.TAIL`): the
process's copy of the documents not merged yet, which a search scores them from, and
the merges it asks for (:mod:`erstwhile.store.sqlite.lexical_merge`). It is the
dialect's ``lexical_tail`` (:class:`erstwhile.store.sql.dialect.LexicalTail`)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from erstwhile.store.sql.dialect import Dialect, TailPostings, Tx
from erstwhile.store.sql.lexical import DOCUMENTS, TAIL, TAIL_ENDS, Document
from erstwhile.store.sqlite import lexical_merge


class Tail:
    """A process's copy of the tail's documents (:data:`TAIL`) by namespace and term,
    refreshed inside each search's read transaction from the tail rows appended since
    it last read (each row read with its record's document as it is now: none once the
    record is gone, so a removal is read as one), and given the documents this
    process's writes appended once they commit (:meth:`written`: the writer's own
    counts, never parsed again). A merge removes the tail's first rows and a seq is
    never used twice, so when the first row the copy read is gone, the copy starts
    again from what is left. A read whose snapshot is older than the copy (a thread
    that began before another's refresh), or one inside a write transaction
    (``writing()``: whose rows may yet be rolled back, and their seqs used again),
    reads the whole tail for itself."""

    def __init__(
        self,
        writing: Callable[[], bool] = lambda: False,
        on_commit: Callable[[Callable[[], None]], None] | None = None,
        merge: Callable[[], None] | None = None,
    ) -> None:
        self._writing = writing
        self.on_commit = on_commit
        #: Asks for a merge beside the writers (:func:`lexical_merge.merge_beside`), if the store
        #: makes them; else a write merges the tail itself once it is due.
        self.merge = merge
        self._lock = threading.Lock()
        self._first: int | None = None
        self._seen = 0
        #: record -> (namespace, counts, length)
        self._documents: dict[int, tuple[str, Counter[str], int]] = {}
        #: namespace -> term -> {record: tf}
        self._index: dict[str, dict[str, dict[int, int]]] = {}
        #: ``_index`` entries as arrays (:data:`TailPostings`), made when first searched
        self._arrays: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        #: documents held but not in ``_index`` yet (the writer's: a search indexes them)
        self._unindexed: dict[int, None] = {}

    def due(self, rows: int, tx: Tx, *, over: int = 1) -> bool:
        """Whether the tail, of ``rows`` rows, is due to be merged (``over`` times
        over): :func:`erstwhile.store.sqlite.lexical_merge.merge_due`."""
        return lexical_merge.merge_due(rows, tx, over=over)

    def merge_all(self, d: Dialect, tx: Tx) -> None:
        """Merges the whole tail inside ``tx``, a write's: :func:`lexical_merge.merge_tail`."""
        lexical_merge.merge_tail(d, tx)

    def postings(self, tx: Tx, namespace: str, terms: Iterable[str]) -> TailPostings:
        """The tail's postings of ``terms`` in ``namespace``, as of ``tx``'s snapshot."""
        (first, last) = tx.execute(TAIL_ENDS).fetchone()
        if self._writing():
            return Tail()._read(tx, first, last, namespace, terms)
        with self._lock:
            if first is not None and first == self._first and last < self._seen:
                return Tail()._read(tx, first, last, namespace, terms)  # the copy is ahead
            return self._read(tx, first, last, namespace, terms)

    def written(
        self,
        namespace: str,
        rows: Sequence[tuple[int, Document | None]],
        last: int,
        first_of_tail: int,
        merged: bool,
    ) -> None:
        """A committed write appended ``rows`` (record, its document or None) to the
        tail as its last rows (seqs up to ``last``), the tail then starting at
        ``first_of_tail``; ``merged``: and then merged the tail."""
        first = last - len(rows) + 1
        with self._lock:
            if merged or first == first_of_tail:  # the tail is nothing, or these rows
                self._clear()
                if merged:
                    return
                self._first, self._seen = first, first - 1
            if self._first != first_of_tail or self._seen != first - 1:
                return  # a search reads them
            for record, document in rows:
                self._drop(record)
                if document is not None and document[0]:
                    counts, length = document
                    self._documents[record] = (namespace, counts, length)
                    self._unindexed[record] = None
            self._seen = last

    def merged(self) -> None:
        """A merge of this process's has committed: the tail's first rows are gone (all
        of them, or those up to where a merge beside the writers began), so the copy
        starts again from what is left."""
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._documents.clear()
        self._index.clear()
        self._arrays.clear()
        self._unindexed.clear()
        self._first = None

    def _drop(self, record: int) -> None:
        old = self._documents.pop(record, None)
        if old is None:
            return
        if record in self._unindexed:  # held, not indexed yet
            del self._unindexed[record]
            return
        index = self._index[old[0]]
        arrays = self._arrays.get(old[0])
        for term in old[1]:
            held = index[term]
            del held[record]
            if not held:
                del index[term]
            if arrays:
                arrays.pop(term, None)

    def _add(self, record: int, namespace: str, counts: Counter[str]) -> None:
        index = self._index.get(namespace)
        if index is None:
            index = self._index[namespace] = {}
        for term, tf in counts.items():
            found = index.get(term)
            if found is None:
                index[term] = {record: tf}
            else:
                found[record] = tf
        arrays = self._arrays.get(namespace)
        if arrays:
            for term in counts:
                arrays.pop(term, None)

    def _read(
        self, tx: Tx, first: int | None, last: int | None, namespace: str, terms: Iterable[str]
    ) -> TailPostings:
        self._refresh(tx, first, last)
        documents = self._documents
        if self._unindexed:
            for record in self._unindexed:
                held = documents[record]
                self._add(record, held[0], held[1])
            self._unindexed.clear()
        found: TailPostings = {}
        index = self._index.get(namespace)
        if not index:
            return found
        made = self._arrays.get(namespace)
        if made is None:
            made = self._arrays[namespace] = {}
        for term in terms:
            arrays = made.get(term)
            if arrays is None:
                postings = index.get(term)
                if not postings:
                    continue
                count = len(postings)
                arrays = made[term] = (
                    np.fromiter(postings.keys(), np.int64, count),
                    np.fromiter(postings.values(), np.float64, count),
                    np.fromiter((documents[r][2] for r in postings), np.float64, count),
                )
            found[term] = arrays
        return found

    def _refresh(self, tx: Tx, first: int | None, last: int | None) -> None:
        if first is None or last is None:  # empty: merged (or never written)
            self._clear()
            return
        if first != self._first:  # merged since (or a first read): all of it anew
            self._clear()
            self._first, self._seen = first, first - 1
        if last <= self._seen:
            return
        rows = tx.execute(
            f"SELECT t.record, x.namespace, x.terms, x.length FROM {TAIL} t"
            f" LEFT JOIN {DOCUMENTS} x ON x.record = t.record WHERE t.seq > ? AND t.seq <= ?"
            " ORDER BY t.seq",
            (self._seen, last),
        )
        for record, namespace, text, length in rows:
            self._drop(record)
            if namespace is not None:
                counts = Counter(str(text).split())
                self._documents[record] = (namespace, counts, int(length))
                self._unindexed[record] = None
        self._seen = last

"""The lexical lane, once for both backends: BM25 over tables the store owns.

Each record's terms (:mod:`erstwhile.domain.words`, by its namespace's text-search
language) are rows of ``lexical_postings (namespace, term, record, tf, length)``;
``lexical_terms (namespace, term, df)`` counts the namespace's records that hold a
term (where there is a tail, below, the merged ones: a search counts the tail's
itself, and a merge adds them), and ``lexical_stats (namespace,
language, documents, length)`` its records and their total length in terms. All
three are written in the transaction that changes the record, and every key starts
with the namespace: a search reads only its own namespace's rows, and one tenant's
records never move another's scores. When a
record's content is replaced, its postings are kept in ``past_postings`` under the
outgoing content's hash (record time, :mod:`erstwhile.store.sql.past`), so a
``known_at`` search ranks past versions from postings too; they count in no
statistics.

Where the dialect keeps a tail (``Dialect.lexical_tail``: SQLite), a write writes no
postings at all: each record's document (its terms, repeated as often as they occur, and
its length) is one row of :data:`DOCUMENTS`, and its record's rowid is appended to
:data:`TAIL` (the documents not merged yet; also on a hard delete, so that whoever
copied the tail learns of it). A search scores the tail's documents itself, from the
store's in-process copy of them (:class:`Tail`, refreshed inside the search's read
transaction from the tail rows appended since), with the same N, mean length and df (the
tail's documents count in no ``lexical_terms`` df until merged: a search adds the copy's
counts) and the same whole-number parts: the ranking and scores are those of one
postings table. ``lexical_postings`` is ordered by term, so a batch's postings would
land on a page per distinct term; a merge (:func:`merge_tail`: the documents' postings
made and counted in SQL, then inserted in the key's order) writes them for many batches
at once, and where the dialect keys the postings by merge after the namespace
(``Dialect.lexical_segments``: SQLite, ``seg``, listed in :data:`SEGMENTS`) it appends
them at the key's end as a segment of their own instead of among every term's postings,
which rewrote most of the table's pages at every merge (a search seeks each term once
per merge of its namespace: :func:`postings_of`). Once a write brings the tail to its
bound (:func:`merge_due`), the store merges it beside the writers where it can
(``Tail.merge``: SQLite's thread, :func:`merge_beside`, which makes the postings before
it takes the write lock), so no write waits for a merge while the writers leave it a
moment; a write that finds the tail twice due (none came) merges it itself, so the tail
stays bounded. A record's postings are always all in ``lexical_postings`` or its
document all in the tail (written, replaced and merged whole). Such a dialect, and one
that says so (``Dialect.lexical_documents``: PostgreSQL), finds a record's postings by
its terms in :data:`DOCUMENTS`, so no postings table carries an index by record, which
cost every batch (and every merge) as much again as the postings themselves.

BM25 (k1 = 1.2, b = 0.75, Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, which
stays positive) with N, the mean length and df of the searched namespace, over every
record row of it (the scope decides which records are ranked, never the statistics).
The idf is computed once in Python and passed in, and each term's part of a score is
cut to a whole number of 1e-9 before the parts are summed: the sum is then exact in
any order, so SQLite and PostgreSQL return the same scores to the last bit, and the
same order (ties by id).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import itemgetter
from typing import Any, cast

import numpy as np

from erstwhile.domain.records import Record
from erstwhile.domain.words import DEFAULT_LANGUAGE, LANGUAGES, query_terms, term_counts
from erstwhile.store.base import LexicalHits
from erstwhile.store.sql.dialect import Dialect, Lane, Tx, WriterBeside, chunks
from erstwhile.store.sql.maintenance import Finding
from erstwhile.store.sql.rows import COLUMNS, best, hits, prefixed
from erstwhile.store.sql.scope import known_scope, scope_clause

K1 = 1.2
B = 0.75
#: Each term's part of a score is a whole number of 1/SCALE.
SCALE = 1e9
#: Records re-indexed per read when a namespace's language changes (or at migration).
REINDEX_BATCH = 1000
#: A query ranks by at most this many of its terms, the rarest (a query that long is a
#: document; the bound keeps the statement's parameters within every engine's limit).
MAX_QUERY_TERMS = 1000

#: The postings table: every merged document's postings.
MAIN = "lexical_postings"
#: Where the dialect keys :data:`MAIN` by merge (``Dialect.lexical_segments``: SQLite),
#: each namespace's merges that wrote postings of it, as rows ``(namespace, seg)``: a
#: posting's ``seg`` is the last tail seq of the merge that wrote it (0: written by a
#: re-index or a migration), and a search seeks each term once per merge of its
#: namespace (:func:`postings_of`).
SEGMENTS = "lexical_segments"
#: The documents not merged yet, as rows ``(seq, record)`` (AUTOINCREMENT: a seq is
#: never used twice, so a copy reads what was appended since it last read); also a
#: removed or replaced record's row. Only a merge removes rows: the first ones, up to
#: the last it merged (all of them, or those up to where a merge beside the writers
#: began).
TAIL = "lexical_tail"
#: Segments a merge beside the writers is copying into :data:`MAIN`, not listed in
#: :data:`SEGMENTS` yet, so in no search (:func:`merge_beside`): ``(namespace, seg)``.
PENDING = "lexical_pending"
#: The tail's first and last seq (each its own min or max: SQLite reads one end of the
#: key for each, where ``min(seq), max(seq)`` in one SELECT would read every row).
_ENDS = f"SELECT (SELECT min(seq) FROM {TAIL}), (SELECT max(seq) FROM {TAIL})"
#: The tail is due to be merged at this many rows, or more in a large store
#: (:func:`merge_due`), and at most :data:`TAIL_MAX`; a write merges it itself at twice
#: what is due.
TAIL_ROWS = 8_000
TAIL_MAX = 40_000
#: Each record's terms (where the dialect keeps a tail, or says so): ``(record, namespace,
#: terms, length)``, the terms space-separated, each as often as the content holds it.
DOCUMENTS = "lexical_docs"
#: The index of replaced versions by record, which a known_at ranking reads them by.
_BY_RECORD = "record_past_record"
#: A record's terms with their counts, and its length in terms.
Document = tuple[Counter[str], int]


def idf(documents: int, df: int) -> float:
    """Lucene's BM25 idf: positive however common the term."""
    return math.log(1.0 + (documents - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Weights:
    """One query's BM25 constants: per term ``idf * (k1 + 1) * SCALE``, and the two
    terms of the length norm ``k1 * (1 - b) + k1 * b / avgdl * length``."""

    terms: list[tuple[str, float]]
    base: float
    per_length: float


def tiers(d: Dialect) -> list[str]:
    """Where a namespace's current documents are (each record's in one): the postings
    table, and the tail where the dialect keeps one (for :func:`integrity`)."""
    return [MAIN] if d.lexical_tail is None else [MAIN, TAIL]


def documented(d: Dialect | None) -> bool:
    """Whether the dialect keeps :data:`DOCUMENTS` (it does where it keeps a tail, and
    where it says so: ``Dialect.lexical_documents``)."""
    return d is not None and (d.lexical_tail is not None or d.lexical_documents)


def packed(counts: Counter[str]) -> str:
    """A document's terms as :data:`DOCUMENTS` holds them (a term is a run of letters
    and digits, never a space), each as often as the content holds it, in order: one
    content, one text."""
    return " ".join(sorted(counts.elements()))


def postings_of(d: Dialect, term: str, alias: str = "p") -> str:
    """Joins :data:`MAIN` as ``alias``: the postings of ``term`` (an expression) in
    the namespace of the one parameter it takes. Where the postings are keyed by merge
    (``Dialect.lexical_segments``), one seek per merge of the namespace (CROSS JOIN:
    SQLite joins in the order written, else it may range over the namespace's postings
    for each term and look each one's merge up)."""
    if d.lexical_segments:
        return (
            f"CROSS JOIN {SEGMENTS} g ON g.namespace = ? CROSS JOIN {MAIN} {alias}"
            f" ON {alias}.namespace = g.namespace AND {alias}.seg = g.seg"
            f" AND {alias}.term = {term}"
        )
    return f"JOIN {MAIN} {alias} ON {alias}.namespace = ? AND {alias}.term = {term}"


def _in_segments(segmented: bool, alias: str, namespace: str) -> str:
    """`` AND`` ``alias``'s seg is one of the merges of ``namespace`` (an expression)
    where the postings are keyed by merge, so that a lookup by namespace, term and
    record seeks once per merge; else nothing."""
    if not segmented:
        return ""
    return f" AND {alias}seg IN (SELECT seg FROM {SEGMENTS} WHERE namespace = {namespace})"


def _stored(tx: Tx, namespace: str, rowid: int) -> Document | None:
    """The record's document as :data:`DOCUMENTS` holds it, if it has one."""
    row = tx.execute(
        f"SELECT terms, length FROM {DOCUMENTS} WHERE namespace = ? AND record = ?",
        (namespace, rowid),
    ).fetchone()
    return None if row is None else (Counter(str(row[0]).split()), int(row[1]))


def _sums(
    d: Dialect, w: Weights, namespace: str, tail: Scores, *, content_hash: bool = False
) -> tuple[str, list[Any]]:
    """Each current record's score summed over the query's terms, as rows (namespace,
    record, [content_hash NULL,] score) from the postings and the tail's scores
    (:func:`_tail_scores`, passed as one JSON parameter: only a SQLite store has a
    tail), and the parameters."""
    values, score = _term_scores(d, w)
    hashed = " CAST(NULL AS TEXT) AS content_hash," if content_hash else ""
    sql = (
        f" SELECT p.namespace, p.record,{hashed} sum({score}) AS score"
        f" FROM (VALUES {values}) q {postings_of(d, 'q.column1')}"
        " GROUP BY p.namespace, p.record"
    )
    params = _term_params(w, namespace)
    summed = _summed(tail)
    if summed:
        sql += f" UNION ALL SELECT ?, CAST(key AS INTEGER),{hashed} value FROM json_each(?)"
        params += [namespace, json.dumps(summed)]
    return sql, params


def _term_scores(d: Dialect, w: Weights) -> tuple[str, str]:
    """The query's terms as a VALUES list (term, weight), and one posting's part of
    the score (``q`` a term, ``p`` a posting); their parameters: :func:`_term_params`."""
    values = ", ".join("(?, ?)" for _ in w.terms)
    return values, d.truncated("q.column2 * p.tf / (p.tf + ? + ? * p.length)")


def _term_params(w: Weights, namespace: str) -> list[Any]:
    """The parameters of one table's sums: the length norm, the terms, the namespace."""
    return [w.base, w.per_length, *(v for pair in w.terms for v in pair), namespace]


def weights(
    documents: int, length: int, df: dict[str, int], terms: Sequence[str], *, known: bool = False
) -> Weights:
    """The constants for ``terms`` (those with no df match nothing and are left out;
    ``known``: a term with no df counts as held by one record, for a ``known_at``
    search, whose past versions may hold terms no current record does)."""
    mean = length / documents if documents and length else 1.0
    if known:
        df = {t: max(df.get(t, 0), 1) for t in terms}
    found = [t for t in terms if df.get(t)]
    if len(found) > MAX_QUERY_TERMS:
        found = sorted(found, key=lambda t: (df[t], t))[:MAX_QUERY_TERMS]
    return Weights(
        terms=[(t, idf(documents, df[t]) * (K1 + 1) * SCALE) for t in found],
        base=K1 * (1 - B),
        per_length=K1 * B / mean,
    )


#: The tail's postings' parts of one query's scores (1/SCALE units): record rowids and
#: their parts, one per posting (a record's summed by whoever ranks them).
Scores = tuple[np.ndarray, np.ndarray]
#: The tail's postings of a query's terms: term -> (records, tfs, lengths), arrays
#: (int64, float64, float64).
TailPostings = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


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
        #: Asks for a merge beside the writers (:func:`merge_beside`), if the store
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

    def postings(self, tx: Tx, namespace: str, terms: Iterable[str]) -> TailPostings:
        """The tail's postings of ``terms`` in ``namespace``, as of ``tx``'s snapshot."""
        (first, last) = tx.execute(_ENDS).fetchone()
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


# -- search -------------------------------------------------------------------------


def search(d: Dialect, lane: Lane) -> list[tuple[Record, float]]:
    """The best ``limit`` in-scope records by BM25 (higher is better), ties by id.

    Two statements: the namespace's statistics with the df of the query's terms (in
    every language, so one read serves whatever language the namespace has), then
    the ranking. They are not one snapshot (that costs PostgreSQL four more round
    trips): a write committed between them shifts scores by its own counts at most.
    A ``known_at`` search (:func:`_known`) reads in one snapshot instead, since a
    write between its reads could move a record from one half to the other."""
    namespace, request = lane.namespace, lane.request
    text = request.query or ""
    candidates = {t for language in LANGUAGES for t in query_terms(text, language)}
    if not candidates:
        return []
    test, test_params = d.in_list("t.term", sorted(candidates))
    # a snapshot where a scope copy may decide the scope: the copy, the postings and the
    # rows read are then one state of the file
    copied = lane.known_at is None and d.has_scope_copy
    # one snapshot where the tail's copy is read too: its documents and the postings
    # are then one state of the file
    one_state = copied or lane.known_at is not None or d.lexical_tail is not None
    with d.db.snapshot() if one_state else d.db.read() as tx:
        rows = tx.execute(
            "SELECT s.language, s.documents, s.length, t.term, t.df FROM lexical_stats s"
            f" LEFT JOIN lexical_terms t ON t.namespace = s.namespace AND {test}"
            " WHERE s.namespace = ?",
            [*test_params, namespace],
        ).fetchall()
        stats = rows[0] if rows else None
        if stats is None or not stats[1]:
            return []
        language, documents, length = stats[0], int(stats[1]), int(stats[2])
        df: Counter[str] = Counter()
        for row in rows:
            if row[3] is not None:
                df[row[3]] += int(row[4])
        tailed: TailPostings = {}
        if d.lexical_tail is not None:  # whose documents count in no df until merged
            tailed = d.lexical_tail.postings(tx, namespace, candidates)
            df.update({term: found[0].shape[0] for term, found in tailed.items()})
        terms = query_terms(text, language)
        if lane.known_at is not None:
            w = weights(documents, length, df, terms, known=True)
            found = _known(d, tx, lane, w, _tail_scores(w, tailed))
        else:
            w = weights(documents, length, df, terms)
            if not w.terms:
                return []
            tail = _tail_scores(w, tailed)
            tester = d.scope_test(tx, namespace, request, lane.window) if copied else None
            ranked = _ranked_in_copy(d, tx, lane, w, tail, tester) if tester is not None else None
            if ranked is not None:
                found = ranked
            else:
                where, params = scope_clause(d, "r", namespace, request, lane.window,
                                             probed=True)  # fmt: skip
                rows = _ranked(d, tx, namespace, w, tail, where, params, lane.limit)
                found = hits(rows, request, lambda row: int(row[-1]) / SCALE)
    result = LexicalHits(found)
    result.terms, result.language = tuple(terms), language
    return result


def _tail_scores(w: Weights, tailed: TailPostings) -> Scores:
    """The tail's postings' parts of the query's scores (:data:`Scores`): each computed
    as the SQL expression of :func:`_term_scores` computes it (the same IEEE double
    operations in the same order, element by element, cut toward zero), so the sums are
    those the postings would give."""
    records, parts = [_NO_ROWS], [_NO_ROWS]
    for term, weight in w.terms:
        found = tailed.get(term)
        if found is not None:
            held, tf, length = found
            records.append(held)
            parts.append((weight * tf / (tf + w.base + w.per_length * length)).astype(np.int64))
    return np.concatenate(records), np.concatenate(parts)


_NO_ROWS = np.zeros(0, np.int64)


def _summed(tail: Scores) -> dict[int, int]:
    """Each record's score from the tail's parts (integers: exact in any order)."""
    records, parts = tail
    if not records.shape[0]:
        return {}
    order = np.argsort(records, kind="stable")
    ids = records[order]
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    sums = np.add.reduceat(parts[order], starts)
    return dict(zip(ids[starts].tolist(), sums.tolist(), strict=True))


def _ranked(
    d: Dialect,
    tx: Tx,
    namespace: str,
    w: Weights,
    tail: Scores,
    where: str,
    params: list[Any],
    limit: int,
) -> list[Any]:
    """The best ``limit`` current rows (``records`` aliased ``r``, within ``where``) by
    the postings and the tail, each row ``COLUMNS`` and the score in units of 1/SCALE."""
    sums, sum_params = _sums(d, w, namespace, tail)
    return list(
        tx.execute(
            f"SELECT {prefixed('r')}, s.score FROM ({sums}) s"
            f" {d.records_join('r', 's')} WHERE {where}"
            " ORDER BY s.score DESC, r.id LIMIT ?",
            [*sum_params, *params, limit],
        ).fetchall()
    )


def _ranked_in_copy(
    d: Dialect,
    tx: Tx,
    lane: Lane,
    w: Weights,
    tail: Scores,
    tester: Callable[[np.ndarray], np.ndarray | None],
) -> list[tuple[Record, float]] | None:
    """:func:`_ranked` with the scope decided by the dialect's scope copy: each of the
    query terms' postings is read with its part of the score (computed by the same SQL
    expression, a whole number) as one text value, summed per record in numpy (integers:
    the same sums in any order) with the tail's, and only the records with a posting or
    a tail score are tested against the scope (``tester``, the dialect's scope copy).
    None when the copy cannot decide it."""
    values, score = _term_scores(d, w)
    (listed,) = tx.execute(
        f"SELECT group_concat(x) FROM (SELECT p.record || ',' || {score} AS x"
        f" FROM (VALUES {values}) q {postings_of(d, 'q.column1')})",
        _term_params(w, lane.namespace),
    ).fetchone()
    postings = np.fromstring(listed or "", dtype=np.int64, sep=",").reshape(-1, 2)
    if tail[0].shape[0]:
        postings = np.concatenate([postings, np.column_stack(tail)])
    in_scope = tester(postings[:, 0])
    if in_scope is None:
        return None
    if in_scope.shape[0] == 0:
        return []
    records = postings[:, 0]
    member = np.zeros(int(records.max()) + 1 if records.shape[0] else 1, bool)
    member[in_scope[in_scope < member.shape[0]]] = True
    kept = postings[member[records]]
    order = np.argsort(kept[:, 0], kind="stable")
    ids = kept[order, 0]
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    rowids, sums = ids[starts], np.add.reduceat(kept[order, 1], starts)
    if rowids.shape[0] > lane.limit:
        rowids, sums = _best_by_id(d, tx, rowids, sums, lane.limit)
    by_rowid = dict(zip(rowids.tolist(), sums.tolist(), strict=True))
    found: list[tuple[Record, float]] = []
    for chunk in chunks(rowids.tolist(), 500):
        test, test_params = d.in_list("rowid", chunk)
        rows = tx.execute(f"SELECT {COLUMNS} FROM records WHERE {test}", test_params)
        found += hits(rows, lane.request, lambda row: by_rowid[row[0]] / SCALE)
    return best(found, lane.limit)


def _best_by_id(
    d: Dialect, tx: Tx, rowids: np.ndarray, sums: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``limit`` best of ``rowids`` by score, ties by id: every one above the
    ``limit``-th score, and of those tied with it the first by id (only their ids read,
    however many are tied)."""
    kth = np.partition(sums, -limit)[-limit]
    above = np.flatnonzero(sums > kth)
    tied = np.flatnonzero(sums == kth)
    wanted = limit - above.shape[0]
    if tied.shape[0] > wanted:
        ids: list[tuple[str, int]] = []
        for chunk in chunks(rowids[tied].tolist(), 500):
            test, params = d.in_list("rowid", chunk)
            ids += tx.execute(f"SELECT id, rowid FROM records WHERE {test}", params).fetchall()
        first = {rowid for _, rowid in sorted(ids)[:wanted]}
        tied = tied[np.fromiter((r in first for r in rowids[tied].tolist()), bool, tied.shape[0])]
    chosen = np.concatenate([above, tied])
    return rowids[chosen], sums[chosen]


def _known(d: Dialect, tx: Tx, lane: Lane, w: Weights, tail: Scores) -> list[tuple[Record, float]]:
    """BM25 over the records as known at ``lane.known_at``, with the namespace's
    statistics of now (the same N, mean length and df the current lane uses; a query
    term no current record holds counts as held by one record, so a word only a past
    version held still finds it). Current rows recorded by then are ranked from their
    postings (and the tail's scores); a replaced version (``record_past``) from its
    record's current ones when it held the content the record holds now, else from
    the postings kept for its own content (``past_postings``, by hash). Each record has
    one version at an instant, so the two best-``limit`` lists merge without
    duplicates."""
    assert lane.known_at is not None
    if not w.terms:
        return []
    current, replaced = known_scope(
        d, "r", lane.namespace, lane.request, lane.window, lane.known_at, probed=True
    )
    rows = _ranked(d, tx, lane.namespace, w, tail, current.where, current.params, lane.limit)
    sums, sum_params = _sums(d, w, lane.namespace, tail, content_hash=True)
    values, score = _term_scores(d, w)
    rows += tx.execute(
        f"SELECT {prefixed('r', 'record')}, s.score FROM ({sums}"
        " UNION ALL"
        f" SELECT p.namespace, p.record, p.content_hash, sum({score}) AS score"
        f" FROM (VALUES {values}) q JOIN past_postings p"
        " ON p.namespace = ? AND p.term = q.column1"
        " GROUP BY p.namespace, p.record, p.content_hash) s"
        f" {d.records_join('r', 's', table='record_past', column='record', index=_BY_RECORD)}"
        f" {d.records_join('c', 's')}"
        f" WHERE {replaced.where} AND (CASE WHEN s.content_hash IS NULL"
        " THEN r.content_hash = c.content_hash"
        " ELSE r.content_hash = s.content_hash AND r.content_hash <> c.content_hash END)"
        " ORDER BY s.score DESC, r.id LIMIT ?",
        [*sum_params, *_term_params(w, lane.namespace), *replaced.params, lane.limit],
    ).fetchall()
    return best(hits(rows, lane.request, lambda row: int(row[-1]) / SCALE), lane.limit)


def bound_language(tx: Tx, namespace: str) -> str | None:
    """The language the namespace is bound to, if it is yet."""
    row = tx.execute(
        "SELECT language FROM lexical_stats WHERE namespace = ?", (namespace,)
    ).fetchone()
    return str(row[0]) if row else None


def language(tx: Tx, namespace: str) -> str:
    """The language the namespace's records are indexed in (the default before any)."""
    return bound_language(tx, namespace) or DEFAULT_LANGUAGE


# -- writes -------------------------------------------------------------------------


@dataclass
class LexicalWrites:
    """One transaction's changes to one namespace's lexical rows.

    The namespace's ``lexical_stats`` row is locked first (where rows lock), so the
    language cannot change under a write and writers of one namespace add to its
    counts in turn. Postings of new documents wait in memory and every count is a
    delta until :meth:`flush`, which writes them once, terms in sorted order (two
    transactions then never wait for each other's terms in a cycle)."""

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

    def language(self) -> str:
        if self._language is None:
            self.tx.execute(
                "INSERT INTO lexical_stats (namespace, language, documents, length)"
                " VALUES (?, ?, 0, 0) ON CONFLICT (namespace) DO NOTHING",
                (self.namespace, DEFAULT_LANGUAGE),
            )
            row = self.tx.execute(
                "SELECT language FROM lexical_stats WHERE namespace = ?" + self.d.lock_for_update,
                (self.namespace,),
            ).fetchone()
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
        self.language()  # the stats row is locked before it changes
        self._documents -= 1
        self._take(rowid)

    def keep(self, rowid: int, content_hash: str) -> None:
        """The record's content (of hash ``content_hash``) is about to be replaced:
        its postings are kept for ``known_at`` searches (:func:`_known`)."""
        pending = self._pending.get(rowid)
        if pending is not None:  # written in this transaction, not in the table yet
            _insert_postings(self.tx, self.namespace, {rowid: pending}, content_hash=content_hash)
            return
        if documented(self.d):
            stored = _stored(self.tx, self.namespace, rowid)
            if stored is not None:
                _insert_postings(self.tx, self.namespace, {rowid: stored},
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
            stored = _stored(self.tx, self.namespace, rowid)
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
            segments = _in_segments(self.d.lexical_segments, "", "?")
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
        _insert_postings(self.tx, ns, written, self.d)
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
        (first, last) = self.tx.execute(_ENDS).fetchone()
        held = int(last) - int(first) + 1
        due = merge_due(held, self.tx)
        ask = tail.merge if tail.on_commit is not None else None  # a merge beside them
        # a merge beside the writers that has not come (the writers leave it no turn,
        # or another process holds the file) is made here once the tail is twice due
        merged = due and (ask is None or merge_due(held, self.tx, over=2))
        ns = self.namespace
        if merged:
            merge_tail(self.d, self.tx)
        if tail.on_commit is not None:
            rows = [(r, written.get(r)) for r in records]
            tail.on_commit(lambda: tail.written(ns, rows, int(last), int(first), merged))
            if due and not merged and ask is not None:
                tail.on_commit(ask)


def merge_due(rows: int, tx: Tx, *, over: int = 1) -> bool:
    """Whether the tail, of ``rows`` rows, is due to be merged (``over``: whether it
    holds that many times what is due).

    A search seeks each query term once per merge of its namespace where the postings
    are keyed by merge (else a merge rewrites pages of :data:`MAIN` in proportion to
    its size), while a search's first copy of the tail reads all of it. So the bound
    on the tail's rows grows as ``sqrt(TAIL_ROWS * merged / 4)`` (8,000 up to
    32,000 merged records; ~14,000 at 100k records), up to :data:`TAIL_MAX` (from 800k
    records on), the merged documents estimated by every namespace's records less the
    tail's rows: 10 merges in the first 100k records written, 41 in the first 1M. When
    to merge never changes what a search finds."""
    if rows < TAIL_ROWS * over:
        return False
    if rows >= TAIL_MAX * over:
        return True
    (documents,) = tx.execute("SELECT coalesce(sum(documents), 0) FROM lexical_stats").fetchone()
    merged = max(int(documents) - rows, 0)
    return rows * rows * 4 >= TAIL_ROWS * merged * over * over


def merge_beside(d: Dialect) -> None:
    """A merge beside the writers (``Tail.merge`` asked for it after a write found the
    tail due), made in steps so that the writers wait for none of them, or little:

    1. the postings of the tail's documents are made in a read transaction, in a
       temporary table of the thread's connection (:func:`_prepare`: one statement that
       SQLite runs without Python's lock, and without the write lock, beside the
       writers);
    2. the merge claims its segment (:data:`PENDING`), and copies the postings into
       :data:`MAIN` about :data:`MOVE_CHUNK` at a time, each copy one statement of its
       own (``Database.write_one``) begun as a write commits, so it runs while the
       writer makes its next batch: no search sees them (a search finds a segment's
       postings once it is listed in :data:`SEGMENTS`);
    3. a write transaction lists the segment, counts its terms and removes the tail's
       rows it holds (:func:`_move`).

    Documents written meanwhile stay in the tail, and a record written or removed
    since the postings were made has none copied after (a copy leaves out the records
    with a tail row past the merge's) and none kept (the rewrite or removal removes
    those copied before, as it removes its listed postings: ``LexicalWrites._take``).
    If another merge came first (another process's, or a write's that found the tail
    twice due), this one is given up, its postings removed with its claim by whichever
    merge is listed next. The process's copy of the tail is cleared once the segment
    is listed."""
    db = cast(WriterBeside, d.db)
    try:
        with db.snapshot() as tx:
            (first, last) = tx.execute(_ENDS).fetchone()
            if first is None or not merge_due(int(last) - int(first) + 1, tx):
                return
            first, last = int(first), int(last)
            _prepare(tx, last)
            bounds = tx.execute(_CHUNKS, (MOVE_CHUNK, MOVE_CHUNK)).fetchall()
            spaces = tx.execute(f"SELECT count(DISTINCT namespace) FROM {_COUNTS}").fetchone()[0]
        if spaces and not _claim(db, first, last, spaces):
            return
        edges: list[tuple[str, str] | None] = [None, *bounds, None]
        for low, high in pairwise(edges) if spaces else ():
            db.next_commit(MOVE_WAIT_S)
            db.write_one(*_copy(last, low, high))
        db.write(lambda tx: _move(d, tx, first, last, copied=True))
    finally:
        with db.read() as conn:
            _drop(conn)


def _claim(db: WriterBeside, first: int, last: int, spaces: int) -> bool:
    """Lists the merge's segment ``last`` in :data:`PENDING` for each of its
    namespaces, if the tail still starts at ``first`` (no merge came since) and no
    other merge claimed it; whether it did."""
    try:
        claimed = db.write_one(
            f"INSERT INTO {PENDING} (namespace, seg) SELECT DISTINCT namespace, ?"
            f" FROM {_COUNTS} WHERE (SELECT min(seq) FROM {TAIL}) = ?",
            (last, first),
        )
    except sqlite3.IntegrityError:  # another process's merge of the same rows
        return False
    return claimed == spaces


def _copy(
    last: int, low: tuple[str, str] | None, high: tuple[str, str] | None
) -> tuple[str, list[Any]]:
    """The statement copying the postings of :data:`_MERGING` from term ``low`` up to
    ``high`` (None: from the first, to the last) into :data:`MAIN` as segment
    ``last``: none of a record with a tail row past ``last`` (written or removed
    since they were made), none once the claim is gone (another merge came)."""
    where: list[str] = []
    params: list[Any] = [last, last, last]
    if low is not None:
        where.append("(namespace, term) >= (?, ?)")
        params += low
    if high is not None:
        where.append("(namespace, term) < (?, ?)")
        params += high
    return (
        f"INSERT INTO {MAIN} (seg, {', '.join(POSTING_COLUMNS)})"
        f" SELECT ?, {', '.join(POSTING_COLUMNS)} FROM {_MERGING}"
        f" WHERE record NOT IN (SELECT record FROM {TAIL} WHERE seq > ?)"
        f" AND EXISTS (SELECT 1 FROM {PENDING} WHERE seg = ?)"
        + "".join(f" AND {test}" for test in where),
        params,
    )


def merge_tail(d: Dialect, tx: Tx) -> None:
    """Moves every document of the tail (of every namespace) into :data:`MAIN` within
    ``tx`` (a write's: the tail it finds twice due, or a re-index's) and empties the
    tail."""
    (first, last) = tx.execute(_ENDS).fetchone()
    if first is None:
        return
    _prepare(tx, int(last))
    _move(d, tx, int(first), int(last))
    _drop(tx)


#: The postings a merge moves, made before it takes the write lock: a temporary table
#: (the connection's own, in memory: ``connection.connect``), in the order of
#: :data:`MAIN`'s key, so the move inserts each page's postings beside the last.
_MERGING = "temp.lexical_merging"
#: Each term's count among them, made with them.
_COUNTS = "temp.lexical_merging_counts"
#: The records whose tail rows they were made of.
_RECORDS = "temp.lexical_merging_records"

#: Postings a merge beside the writers copies into :data:`MAIN` in one statement
#: (:func:`merge_beside`): ~12 ms beside a writer at 100k records, which a writer's
#: time between two batches mostly covers.
MOVE_CHUNK = 25_000
#: Seconds a copy waits for a write to commit before it goes on regardless.
MOVE_WAIT_S = 0.02
#: Where the postings of :data:`_MERGING` are cut into copies of about
#: :data:`MOVE_CHUNK` (each term's postings in one): the ``(namespace, term)`` after
#: which each copy's running count crosses a multiple of it.
_CHUNKS = (
    "SELECT namespace, term FROM (SELECT namespace, term, df, sum(df) OVER"
    " (ORDER BY namespace, term ROWS UNBOUNDED PRECEDING) AS upto"
    f" FROM {_COUNTS}) WHERE upto / ? <> (upto - df) / ?"
)


def _drop(tx: Tx) -> None:
    for table in (_MERGING, _COUNTS, _RECORDS):
        tx.execute(f"DROP TABLE IF EXISTS {table}")


def _prepare(tx: Tx, last: int) -> None:
    """Fills :data:`_MERGING` with the postings of the documents of the tail's records
    whose rows it holds up to seq ``last``, each document as ``tx`` sees it (none once
    its record is gone). The documents are split and counted in SQL: a document's terms
    (:func:`packed`) are runs of letters and digits joined by single spaces, so quoting
    each and joining them with commas makes a JSON array of them, which ``json_each``
    lists (:func:`split_terms`); a record's term met again adds one to its posting's tf
    (the table's key orders them: no sort of its own, 1.6x faster than a GROUP BY);
    and each term's count of them (:data:`_COUNTS`); and the records they are of
    (:data:`_RECORDS`), by which the move finds those written since in a few lookups."""
    _drop(tx)
    tx.execute(f"CREATE TABLE {_RECORDS} (record INTEGER PRIMARY KEY)")
    tx.execute(f"INSERT INTO {_RECORDS} SELECT DISTINCT record FROM {TAIL} WHERE seq <= ?", (last,))
    tx.execute(
        f"CREATE TABLE {_MERGING} (namespace TEXT NOT NULL, term TEXT NOT NULL,"
        " record INTEGER NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL,"
        " PRIMARY KEY (namespace, term, record)) WITHOUT ROWID"
    )
    tx.execute(
        f"INSERT INTO {_MERGING} (namespace, term, record, tf, length)"
        " SELECT x.namespace, j.value, x.record, 1, x.length"
        f" FROM {_RECORDS} t"
        f" JOIN {DOCUMENTS} x ON x.record = t.record, {split_terms('x.terms')} j"
        " WHERE x.terms <> ''"
        " ON CONFLICT (namespace, term, record) DO UPDATE SET tf = tf + 1"
    )
    _count(tx)


def _count(tx: Tx) -> None:
    """(Re)makes :data:`_COUNTS`: each term's number of documents in :data:`_MERGING`
    (read in its key's order: no sort)."""
    tx.execute(f"DROP TABLE IF EXISTS {_COUNTS}")
    tx.execute(
        f"CREATE TABLE {_COUNTS} AS SELECT namespace, term, count(*) AS df"
        f" FROM {_MERGING} GROUP BY namespace, term"
    )


def split_terms(column: str) -> str:
    """A table of each term of ``column`` (a :func:`packed` document, never empty), one
    row per occurrence, its ``value`` the term: the terms quoted and joined with commas
    make a JSON array (a term, a run of letters and digits, holds no quote, backslash
    or control character that JSON would have escaped)."""
    return f"""json_each('["' || replace({column}, ' ', '","') || '"]')"""


def _move(d: Dialect, tx: Tx, first: int, last: int, *, copied: bool = False) -> None:
    """Moves :data:`_MERGING` (made of the tail's rows ``first``..``last``) into
    :data:`MAIN` as segment ``last`` (``copied``: already copied there, unlisted:
    :func:`merge_beside`), the documents' counts into ``lexical_terms``, and removes
    those tail rows; nothing if the tail no longer starts at ``first`` (a merge came
    since). A record with a later tail row (written or removed since) is left out:
    its document is the tail's still (its postings dropped, and the counts made again
    without it). Every other merge's claim (:data:`PENDING`) goes, with what it copied:
    it began at the same tail, and can no longer be listed."""
    (now_first,) = tx.execute(f"SELECT min(seq) FROM {TAIL}").fetchone()
    if now_first != first:
        return
    # records with a tail row up to last (in the postings made) and one after it: the
    # few rows after last, each looked up among the merge's records (the rows up to
    # last are as the postings were made of them: only a merge removes tail rows)
    changed = (
        f"SELECT t.record FROM {TAIL} t JOIN {_RECORDS} m ON m.record = t.record WHERE t.seq > ?"
    )
    if tx.execute(f"SELECT EXISTS ({changed})", (last,)).fetchone()[0]:
        # (copied: none of theirs is left there; a copy leaves them out once they
        # change, and the change removed those copied before, LexicalWrites._take)
        tx.execute(f"DELETE FROM {_MERGING} WHERE record IN ({changed})", (last,))
        _count(tx)
    tx.execute(
        "INSERT INTO lexical_terms (namespace, term, df)"
        f" SELECT namespace, term, df FROM {_COUNTS} WHERE true"
        " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df"
    )
    # appended at the key's end, a segment of this merge's own (a dialect that keeps a
    # tail keys its postings by merge: SQLite)
    assert d.lexical_segments
    tx.execute(
        f"INSERT INTO {SEGMENTS} (namespace, seg) SELECT DISTINCT namespace, ? FROM {_COUNTS}",
        (last,),
    )
    if not copied:
        tx.execute(
            f"INSERT INTO {MAIN} (seg, {', '.join(POSTING_COLUMNS)})"
            f" SELECT ?, {', '.join(POSTING_COLUMNS)} FROM {_MERGING}",
            (last,),
        )
    _forget_claims(tx, last)
    tx.execute(f"DELETE FROM {TAIL} WHERE seq <= ?", (last,))
    tail = d.lexical_tail
    if tail is not None and tail.on_commit is not None:
        tail.on_commit(tail.merged)


def _forget_claims(tx: Tx, listed: int) -> None:
    """Removes every claim of :data:`PENDING` and the postings copied for it, but for
    the segments ``listed`` now (a namespace's segment ``listed`` in :data:`SEGMENTS`)."""
    claims = tx.execute(
        f"SELECT c.namespace, c.seg FROM {PENDING} c WHERE NOT EXISTS (SELECT 1 FROM"
        f" {SEGMENTS} g WHERE g.namespace = c.namespace AND g.seg = c.seg AND g.seg = ?)",
        (listed,),
    ).fetchall()
    for namespace, seg in claims:
        tx.execute(f"DELETE FROM {MAIN} WHERE namespace = ? AND seg = ?", (namespace, seg))
    tx.execute(f"DELETE FROM {PENDING}")


# -- indexing a whole namespace -----------------------------------------------------


POSTING_COLUMNS = ("namespace", "term", "record", "tf", "length")
DOCUMENT_COLUMNS = ("record", "namespace", "terms", "length")
_FIRST = itemgetter(0)
_TERM = itemgetter(1)


def _insert_postings(
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
            docs = _documents(namespace, documents)
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
                d.insert_rows(tx, DOCUMENTS, DOCUMENT_COLUMNS, _documents(namespace, documents))
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


def _documents(namespace: str, documents: dict[int, Document]) -> list[tuple[Any, ...]]:
    """:data:`DOCUMENTS` rows of ``documents`` (those with terms: the others have no
    postings to find)."""
    return [
        (rowid, namespace, packed(counts), length)
        for rowid, (counts, length) in documents.items()
        if counts
    ]


def _index_past(tx: Tx, namespace: str, language: str) -> None:
    """Postings for every content the namespace's records held before and hold no
    longer (each record and content hash once)."""
    tx.execute("DELETE FROM past_postings WHERE namespace = ?", (namespace,))
    rows = tx.execute(
        "SELECT DISTINCT r.record, r.content_hash, r.content FROM record_past r"
        " JOIN records c ON c.namespace = r.namespace AND c.rowid = r.record"
        " WHERE r.namespace = ? AND r.content_hash <> c.content_hash",
        (namespace,),
    ).fetchall()
    for rowid, content_hash, content in rows:
        document = term_counts(content, language)
        _insert_postings(tx, namespace, {int(rowid): document}, content_hash=content_hash)


def index_past(tx: Tx) -> None:
    """Postings for every past content of every namespace, in its language (a
    migration)."""
    names = tx.execute("SELECT DISTINCT namespace FROM record_past").fetchall()
    for (namespace,) in sorted(names):
        _index_past(tx, namespace, language(tx, namespace))


def reindex(tx: Tx, namespace: str, language: str, d: Dialect | None = None) -> None:
    """Indexes every record of ``namespace`` anew in ``language`` (in ``tx``; ``d``:
    the store's dialect, whose tail is merged first, so the namespace's documents are
    all in :data:`MAIN` and no copy of the tail holds one; without it, at a migration
    before there was a tail)."""
    if d is not None and d.lexical_tail is not None:
        merge_tail(d, tx)
    segmented = d is not None and d.lexical_segments
    merges = [SEGMENTS, PENDING] if segmented else []
    for table in (MAIN, "lexical_terms", "lexical_stats", *merges):
        tx.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))
    if segmented:  # the postings written below: merge 0's (the column's default)
        tx.execute(f"INSERT INTO {SEGMENTS} (namespace, seg) VALUES (?, 0)", (namespace,))
    if documented(d):
        tx.execute(
            f"DELETE FROM {DOCUMENTS} WHERE namespace = ? AND record IN"
            " (SELECT rowid FROM records WHERE namespace = ?)",
            (namespace, namespace),
        )
    df: Counter[str] = Counter()
    documents = length = last = 0
    while True:
        rows = tx.execute(
            "SELECT rowid, content FROM records WHERE namespace = ? AND rowid > ?"
            " ORDER BY rowid LIMIT ?",
            (namespace, last, REINDEX_BATCH),
        ).fetchall()
        if not rows:
            break
        batch = {int(rowid): term_counts(content, language) for rowid, content in rows}
        _insert_postings(tx, namespace, batch)
        if documented(d):
            tx.executemany(
                f"INSERT INTO {DOCUMENTS} ({', '.join(DOCUMENT_COLUMNS)}) VALUES (?, ?, ?, ?)",
                _documents(namespace, batch),
            )
        for counts, size in batch.values():
            df.update(counts.keys())
            length += size
        documents += len(batch)
        last = int(rows[-1][0])
    tx.executemany(
        "INSERT INTO lexical_terms (namespace, term, df) VALUES (?, ?, ?)",
        [(namespace, term, count) for term, count in sorted(df.items())],
    )
    tx.execute(
        "INSERT INTO lexical_stats (namespace, language, documents, length) VALUES (?, ?, ?, ?)",
        (namespace, language, documents, length),
    )


def index_all(tx: Tx) -> None:
    """Indexes every namespace's records in the default language (a migration)."""
    names = [row[0] for row in tx.execute("SELECT DISTINCT namespace FROM records").fetchall()]
    for namespace in sorted(names):
        reindex(tx, namespace, DEFAULT_LANGUAGE)


def set_language(d: Dialect, tx: Tx, namespace: str, wanted: str) -> bool:
    """Binds ``namespace`` to ``wanted``; re-indexes its records if they were indexed
    in another language. Returns whether anything changed."""
    if LexicalWrites(d, tx, namespace).language() == wanted:
        return False
    reindex(tx, namespace, wanted, d)
    _index_past(tx, namespace, wanted)
    return True


# -- checks ---------------------------------------------------------------------------


def integrity(
    read: Any, tables: Sequence[str] = (MAIN,), *, documents: bool = False, segments: bool = False
) -> Finding:
    """The lexical rows agree with the records: ``read(sql)`` returns rows; ``tables``:
    where the current documents are (:func:`tiers`: the postings, and :data:`TAIL`
    where there is one); ``documents``: whether :data:`DOCUMENTS` is kept
    (:func:`documented`); ``segments``: whether the postings are keyed by merge
    (``Dialect.lexical_segments``)."""
    tail = TAIL in tables
    in_tail = f"x.record IN (SELECT record FROM {TAIL})"
    tail_length = (
        f" + (SELECT coalesce(sum(x.length), 0) FROM {DOCUMENTS} x"
        f" WHERE x.namespace = s.namespace AND {in_tail})"
        if tail
        else ""
    )
    found = Finding("full-text index")
    checks: tuple[tuple[str, str], ...] = (
        ("postings of no record",
         f"SELECT count(*) FROM {MAIN} p WHERE NOT EXISTS (SELECT 1 FROM"
         " records r WHERE r.namespace = p.namespace AND r.rowid = p.record)"),
        ("namespaces whose record count is off",
         "SELECT count(*) FROM lexical_stats s WHERE s.documents <> (SELECT count(*)"
         " FROM records r WHERE r.namespace = s.namespace)"),
        ("namespaces whose total length is off",
         "SELECT count(*) FROM lexical_stats s WHERE s.length <> "
         f"(SELECT coalesce(sum(l), 0) FROM (SELECT max(p.length) AS l FROM {MAIN} p"
         f" WHERE p.namespace = s.namespace{_in_segments(segments, 'p.', 's.namespace')}"
         f" GROUP BY p.record) x){tail_length}"),
        ("terms whose record count is off",  # the tail's documents count once merged
         "SELECT count(*) FROM lexical_terms t WHERE t.df <> "
         f"(SELECT count(*) FROM {MAIN} p WHERE p.namespace = t.namespace"
         f"{_in_segments(segments, 'p.', 't.namespace')} AND p.term = t.term)"),
        ("namespaces with records and no statistics",
         "SELECT count(DISTINCT r.namespace) FROM records r WHERE NOT EXISTS"
         " (SELECT 1 FROM lexical_stats s WHERE s.namespace = r.namespace)"),
    )  # fmt: skip
    if tail:
        checks += (
            ("documents of the tail with postings too",
             f"SELECT count(*) FROM {DOCUMENTS} x WHERE {in_tail} AND EXISTS (SELECT 1"
             f" FROM {MAIN} p WHERE p.namespace = x.namespace AND p.record = x.record"
             f"{_in_segments(segments, 'p.', 'x.namespace')}"
             " AND p.term = substr(x.terms, 1, instr(x.terms || ' ', ' ') - 1))"),
        )  # fmt: skip
    if segments:  # a search seeks the postings by the namespace's merges alone
        checks += (
            ("postings of no merge of their namespace",  # nor of one being copied
             f"SELECT count(*) FROM {MAIN} p WHERE NOT EXISTS (SELECT 1 FROM {SEGMENTS} g"
             " WHERE g.namespace = p.namespace AND g.seg = p.seg) AND NOT EXISTS"
             f" (SELECT 1 FROM {PENDING} c WHERE c.namespace = p.namespace AND c.seg = p.seg)"),
        )  # fmt: skip
    if documents:
        merged = f" AND NOT {in_tail}" if tail else ""
        checks += (
            ("documents of no record",
             f"SELECT count(*) FROM {DOCUMENTS} x WHERE NOT EXISTS (SELECT 1 FROM records r"
             " WHERE r.namespace = x.namespace AND r.rowid = x.record)"),
            ("namespaces whose documents' length is off",
             "SELECT count(*) FROM lexical_stats s WHERE s.length <> (SELECT"
             f" coalesce(sum(x.length), 0) FROM {DOCUMENTS} x WHERE x.namespace = s.namespace)"),
            ("namespaces whose documents' terms are off",
             "SELECT count(*) FROM lexical_stats s WHERE (SELECT coalesce(sum(length(x.terms)"
             " - length(replace(x.terms, ' ', '')) + 1), 0) FROM"
             f" {DOCUMENTS} x WHERE x.namespace = s.namespace{merged}) <> "
             f"(SELECT coalesce(sum(p.tf), 0) FROM {MAIN} p WHERE p.namespace = s.namespace"
             f"{_in_segments(segments, 'p.', 's.namespace')})"),
        )  # fmt: skip
    for label, sql in checks:
        count = read(sql)[0][0]
        if count:
            found.problems.append(f"{count} {label}")
    return found

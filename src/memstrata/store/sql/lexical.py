"""The lexical lane, once for both backends: BM25 over tables the store owns.

Each record's terms (:mod:`memstrata.domain.words`, by its namespace's text-search
language) are rows of ``lexical_postings (namespace, term, record, tf, length)``;
``lexical_terms (namespace, term, df)`` counts the namespace's records that hold a
term (where fresh postings are kept apart, below, the merged ones: a search counts
the fresh ones itself, and a merge adds them), and ``lexical_stats (namespace,
language, documents, length)`` its records and their total length in terms. All
three are written in the transaction that changes the record, and every key starts
with the namespace: a search reads only its own namespace's rows, and one tenant's
records never move another's scores. When a
record's content is replaced, its postings are kept in ``past_postings`` under the
outgoing content's hash (record time, :mod:`memstrata.store.sql.past`), so a
``known_at`` search ranks past versions from postings too; they count in no
statistics.

Where the dialect names a table for fresh postings (SQLite's ``lexical_fresh``), a
write's new postings go there instead, and are merged into ``lexical_postings`` once
it holds :data:`FRESH_ROWS` of them, or more in a large store (:func:`merge_due`).
``lexical_postings`` is ordered by term, so a batch's postings land on a page per
distinct term: thousands of pages rewritten (and written again to the WAL and the
file) for each batch of 1,000 records. The fresh
table is small, so a batch rewrites few of its pages, and a merge writes each page
of ``lexical_postings`` once for many batches. A record's postings are always all in
one of the two tables (written, replaced and merged whole), so a search sums each
record's score within one table, adds the two tables' records together, and ranks
exactly as over one table. Such a dialect, and one that says so
(``Dialect.lexical_documents``: PostgreSQL), also keeps each record's document (its
terms, repeated as often as they occur, and its length) as one row of
:data:`DOCUMENTS`: a record's postings are found by its terms there, so no postings
table carries an index by record, which cost every batch (and every merge) as much
again as the postings themselves.

BM25 (k1 = 1.2, b = 0.75, Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, which
stays positive) with N, the mean length and df of the searched namespace, over every
record row of it (the scope decides which records are ranked, never the statistics).
The idf is computed once in Python and passed in, and each term's part of a score is
cut to a whole number of 1e-9 before the parts are summed: the sum is then exact in
any order, so SQLite and PostgreSQL return the same scores to the last bit, and the
same order (ties by id).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from memstrata.domain.records import Record
from memstrata.domain.words import DEFAULT_LANGUAGE, LANGUAGES, query_terms, term_counts
from memstrata.store.base import LexicalHits
from memstrata.store.sql.dialect import Dialect, Lane, Tx, chunks
from memstrata.store.sql.maintenance import Finding
from memstrata.store.sql.rows import COLUMNS, best, hits, prefixed
from memstrata.store.sql.scope import known_scope, scope_clause

K1 = 1.2
B = 0.75
#: Each term's part of a score is a whole number of 1/SCALE.
SCALE = 1e9
#: Records re-indexed per read when a namespace's language changes (or at migration).
REINDEX_BATCH = 1000
#: A query ranks by at most this many of its terms, the rarest (a query that long is a
#: document; the bound keeps the statement's parameters within every engine's limit).
MAX_QUERY_TERMS = 1000

#: The postings table searches read first, and where merged postings end up.
MAIN = "lexical_postings"
#: Fresh postings (where the dialect keeps them apart) are merged into :data:`MAIN` at
#: the end of the write that brings them to at least this many (:func:`merge_due`).
FRESH_ROWS = 64_000
#: Each record's terms (where the dialect keeps fresh postings): ``(record, namespace,
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
    """The tables a namespace's current postings are in (each record's in one)."""
    return [MAIN] if d.fresh_postings is None else [MAIN, d.fresh_postings]


def documented(d: Dialect | None) -> bool:
    """Whether the dialect keeps :data:`DOCUMENTS` (it does where it keeps fresh
    postings, and where it says so: ``Dialect.lexical_documents``)."""
    return d is not None and (d.fresh_postings is not None or d.lexical_documents)


def packed(counts: Counter[str]) -> str:
    """A document's terms as :data:`DOCUMENTS` holds them (a term is a run of letters
    and digits, never a space), in order: one content, one text."""
    return " ".join(sorted(counts.elements()))


def _stored(tx: Tx, namespace: str, rowid: int) -> Document | None:
    """The record's document as :data:`DOCUMENTS` holds it, if it has one."""
    row = tx.execute(
        f"SELECT terms, length FROM {DOCUMENTS} WHERE namespace = ? AND record = ?",
        (namespace, rowid),
    ).fetchone()
    return None if row is None else (Counter(str(row[0]).split()), int(row[1]))


def _sums(
    d: Dialect, w: Weights, namespace: str, *, content_hash: bool = False
) -> tuple[str, list[Any]]:
    """Each current record's score summed over the query's terms, as rows (namespace,
    record, [content_hash NULL,] score) from every postings table, and the parameters."""
    values, score = _term_scores(d, w)
    hashed = " CAST(NULL AS TEXT) AS content_hash," if content_hash else ""
    branches = [
        f" SELECT p.namespace, p.record,{hashed} sum({score}) AS score"
        f" FROM (VALUES {values}) q JOIN {table} p"
        " ON p.namespace = ? AND p.term = q.column1"
        " GROUP BY p.namespace, p.record"
        for table in tiers(d)
    ]
    return " UNION ALL".join(branches), _term_params(w, namespace) * len(branches)


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
    with d.db.snapshot() if copied or lane.known_at is not None else d.db.read() as tx:
        fresh, fresh_params = "", list[Any]()
        if d.fresh_postings is not None:  # whose records count in no df until merged
            fresh_test, fresh_params = d.in_list("term", sorted(candidates))
            fresh = (
                " UNION ALL SELECT NULL, NULL, NULL, term, count(*)"
                f" FROM {d.fresh_postings} WHERE namespace = ? AND {fresh_test} GROUP BY term"
            )
            fresh_params = [namespace, *fresh_params]
        rows = tx.execute(
            "SELECT s.language, s.documents, s.length, t.term, t.df FROM lexical_stats s"
            f" LEFT JOIN lexical_terms t ON t.namespace = s.namespace AND {test}"
            f" WHERE s.namespace = ?{fresh}",
            [*test_params, namespace, *fresh_params],
        ).fetchall()
        stats = next((row for row in rows if row[0] is not None), None)
        if stats is None or not stats[1]:
            return []
        language, documents, length = stats[0], int(stats[1]), int(stats[2])
        df: Counter[str] = Counter()
        for row in rows:
            if row[3] is not None:
                df[row[3]] += int(row[4])
        terms = query_terms(text, language)
        if lane.known_at is not None:
            found = _known(d, tx, lane, weights(documents, length, df, terms, known=True))
        else:
            w = weights(documents, length, df, terms)
            if not w.terms:
                return []
            tester = d.scope_test(tx, namespace, request, lane.window) if copied else None
            ranked = _ranked_in_copy(d, tx, lane, w, tester) if tester is not None else None
            if ranked is not None:
                found = ranked
            else:
                where, params = scope_clause(d, "r", namespace, request, lane.window,
                                             probed=True)  # fmt: skip
                rows = _ranked(d, tx, namespace, w, where, params, lane.limit)
                found = hits(rows, request, lambda row: int(row[-1]) / SCALE)
    result = LexicalHits(found)
    result.terms, result.language = tuple(terms), language
    return result


def _ranked(
    d: Dialect, tx: Tx, namespace: str, w: Weights, where: str, params: list[Any], limit: int
) -> list[Any]:
    """The best ``limit`` current rows (``records`` aliased ``r``, within ``where``) by
    the postings, each row ``COLUMNS`` and the score in units of 1/SCALE."""
    sums, sum_params = _sums(d, w, namespace)
    return list(
        tx.execute(
            f"SELECT {prefixed('r')}, s.score FROM ({sums}) s"
            f" {d.records_join('r', 's')} WHERE {where}"
            " ORDER BY s.score DESC, r.id LIMIT ?",
            [*sum_params, *params, limit],
        ).fetchall()
    )


def _ranked_in_copy(
    d: Dialect, tx: Tx, lane: Lane, w: Weights, tester: Callable[[np.ndarray], np.ndarray | None]
) -> list[tuple[Record, float]] | None:
    """:func:`_ranked` with the scope decided by the dialect's scope copy: each of the
    query terms' postings is read with its part of the score (computed by the same SQL
    expression, a whole number) as one text value, summed per record in numpy (integers:
    the same sums in any order), and only the records with a posting are tested
    against the scope (``tester``, the dialect's scope copy). None when
    the copy cannot decide it."""
    values, score = _term_scores(d, w)
    branches = " UNION ALL".join(
        f" SELECT p.record || ',' || {score} AS x FROM (VALUES {values}) q JOIN {table} p"
        " ON p.namespace = ? AND p.term = q.column1"
        for table in tiers(d)
    )
    (listed,) = tx.execute(
        f"SELECT group_concat(x) FROM ({branches})",
        _term_params(w, lane.namespace) * len(tiers(d)),
    ).fetchone()
    postings = np.fromstring(listed or "", dtype=np.int64, sep=",").reshape(-1, 2)
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


def _known(d: Dialect, tx: Tx, lane: Lane, w: Weights) -> list[tuple[Record, float]]:
    """BM25 over the records as known at ``lane.known_at``, with the namespace's
    statistics of now (the same N, mean length and df the current lane uses; a query
    term no current record holds counts as held by one record, so a word only a past
    version held still finds it). Current rows recorded by then are ranked from their
    postings; a replaced version (``record_past``) from its record's postings when it
    held the content the record holds now, else from the postings kept for its own
    content (``past_postings``, by hash). Each record has one version at an instant,
    so the two best-``limit`` lists merge without duplicates."""
    assert lane.known_at is not None
    if not w.terms:
        return []
    current, replaced = known_scope(
        d, "r", lane.namespace, lane.request, lane.window, lane.known_at, probed=True
    )
    rows = _ranked(d, tx, lane.namespace, w, current.where, current.params, lane.limit)
    sums, sum_params = _sums(d, w, lane.namespace, content_hash=True)
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
        if self.d.fresh_postings is None:  # fresh postings count at their merge
            self._df.update(counts.keys())
        self._length += length

    def _take(self, rowid: int) -> None:
        pending = self._pending.pop(rowid, None)
        if pending is not None:
            counts, length = pending
            terms: Iterable[str] = counts.keys() if self.d.fresh_postings is None else ()
        elif documented(self.d):
            stored = _stored(self.tx, self.namespace, rowid)
            terms, length = [], 0
            if stored is not None:
                terms, length = list(stored[0]), stored[1]
                self.tx.execute(
                    f"DELETE FROM {DOCUMENTS} WHERE namespace = ? AND record = ?",
                    (self.namespace, rowid),
                )
            fresh = 0
            for chunk in chunks(sorted(terms), 500):
                test, params = self.d.in_list("term", chunk)
                for table in tiers(self.d):  # the record's postings are in one of them
                    fresh += self.tx.execute(
                        f"DELETE FROM {table} WHERE namespace = ? AND {test} AND record = ?",
                        [self.namespace, *params, rowid],
                    ).rowcount * (table != MAIN)
            if fresh:  # fresh postings are in no df yet
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
        """Writes the postings and counts this transaction changed."""
        ns = self.namespace
        written = _insert_postings(self.tx, ns, self._pending, self.d)
        self._pending.clear()
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
        if written and self.d.fresh_postings is not None:
            (total,) = self.tx.execute(
                f"UPDATE {self.d.fresh_postings}_written SET rows = rows + ? RETURNING rows",
                (written,),
            ).fetchone()
            if total >= FRESH_ROWS and merge_due(self.tx, total):
                merge_fresh(self.d, self.tx)


def merge_due(tx: Tx, fresh: int) -> bool:
    """Whether ``fresh`` postings (at least :data:`FRESH_ROWS`) are due to be merged.

    A merge rewrites pages of :data:`MAIN` in proportion to its size, and each batch
    rewrites pages of the fresh table in proportion to the fresh table's: per batch,
    the sum is least when merges come after a number of batches that grows as the
    square root of :data:`MAIN`. So the bound grows as ``sqrt(FRESH_ROWS * merged /
    4)`` (64,000 up to ~270,000 merged postings, a 30k-record store; ~120,000 at 100k
    records, ~380,000 at 1M), the merged postings estimated by the terms of every
    namespace's records (counted once for each time a record holds them) less the
    fresh ones. When to merge never changes what a search finds."""
    (terms,) = tx.execute("SELECT coalesce(sum(length), 0) FROM lexical_stats").fetchone()
    merged = max(int(terms) - fresh, 0)
    return fresh * fresh * 4 >= FRESH_ROWS * merged


def merge_fresh(d: Dialect, tx: Tx) -> None:
    """Moves every fresh posting (of every namespace) into :data:`MAIN`, in the order
    of its key."""
    fresh = d.fresh_postings
    if fresh is None:
        return
    columns = ", ".join(POSTING_COLUMNS)
    tx.execute(  # WHERE true: the upsert's ON is not read as a join's
        "INSERT INTO lexical_terms (namespace, term, df)"
        f" SELECT namespace, term, count(*) FROM {fresh} WHERE true GROUP BY namespace, term"
        " ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df"
    )
    tx.execute(
        f"INSERT INTO {MAIN} ({columns}) SELECT {columns} FROM {fresh}"
        " ORDER BY namespace, term, record"
    )
    tx.execute(f"DELETE FROM {fresh}")
    tx.execute(f"UPDATE {fresh}_written SET rows = 0")


# -- indexing a whole namespace -----------------------------------------------------


POSTING_COLUMNS = ("namespace", "term", "record", "tf", "length")
DOCUMENT_COLUMNS = ("record", "namespace", "terms", "length")
_TERM_AND_RECORD = itemgetter(1, 2)


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
        rows = [
            (namespace, term, rowid, tf, length)
            for rowid, (counts, length) in documents.items()
            for term, tf in counts.items()
        ]
        if not rows:
            return 0
        rows.sort(key=_TERM_AND_RECORD)  # in the key's order: each lands beside the last
        if d is not None:  # a write's postings, as its dialect inserts rows
            d.insert_rows(tx, d.fresh_postings or MAIN, POSTING_COLUMNS, rows)
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
    the store's dialect, whose fresh postings go too; without it, at a migration
    before they existed)."""
    fresh = [d.fresh_postings] if d is not None and d.fresh_postings else []
    for table in (MAIN, *fresh, "lexical_terms", "lexical_stats"):
        tx.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))
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


def integrity(read: Any, tables: Sequence[str] = (MAIN,), *, documents: bool = False) -> Finding:
    """The lexical rows agree with the records: ``read(sql)`` returns rows; ``tables``:
    the postings tables (:func:`tiers`), each record's postings counted once;
    ``documents``: whether :data:`DOCUMENTS` is kept (:func:`documented`)."""

    def each(sql: str) -> str:  # a count over every postings table, p standing for each
        return " + ".join(f"({sql.format(postings=table)})" for table in tables)

    found = Finding("full-text index")
    checks: tuple[tuple[str, str], ...] = (
        ("postings of no record",
         "SELECT " + each("SELECT count(*) FROM {postings} p WHERE NOT EXISTS (SELECT 1 FROM"
                          " records r WHERE r.namespace = p.namespace AND r.rowid = p.record)")),
        ("namespaces whose record count is off",
         "SELECT count(*) FROM lexical_stats s WHERE s.documents <> (SELECT count(*)"
         " FROM records r WHERE r.namespace = s.namespace)"),
        ("namespaces whose total length is off",
         "SELECT count(*) FROM lexical_stats s WHERE s.length <> "
         + each("SELECT coalesce(sum(l), 0) FROM (SELECT max(p.length) AS l FROM {postings} p"
                " WHERE p.namespace = s.namespace GROUP BY p.record) x")),
        ("terms whose record count is off",  # fresh postings count once merged
         "SELECT count(*) FROM lexical_terms t WHERE t.df <> "
         f"(SELECT count(*) FROM {MAIN} p WHERE p.namespace = t.namespace"
         " AND p.term = t.term)"),
        ("namespaces with records and no statistics",
         "SELECT count(DISTINCT r.namespace) FROM records r WHERE NOT EXISTS"
         " (SELECT 1 FROM lexical_stats s WHERE s.namespace = r.namespace)"),
    )  # fmt: skip
    if documents:
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
             f" {DOCUMENTS} x WHERE x.namespace = s.namespace) <> "
             + each("SELECT coalesce(sum(p.tf), 0) FROM {postings} p"
                    " WHERE p.namespace = s.namespace")),
        )  # fmt: skip
    for label, sql in checks:
        count = read(sql)[0][0]
        if count:
            found.problems.append(f"{count} {label}")
    return found

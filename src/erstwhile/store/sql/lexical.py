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
store's in-process copy of them (``lexical_tail.Tail``, refreshed inside the search's read
transaction from the tail rows appended since), with the same N, mean length and df (the
tail's documents count in no ``lexical_terms`` df until merged: a search adds the copy's
counts) and the same whole-number parts: the ranking and scores are those of one
postings table. ``lexical_postings`` is ordered by term, so a batch's postings would
land on a page per distinct term; a merge (``lexical_merge.merge_tail``: the documents' postings
made and counted in SQL, then inserted in the key's order) writes them for many batches
at once, and where the dialect keys the postings by merge after the namespace
(``Dialect.lexical_segments``: SQLite, ``seg``, listed in :data:`SEGMENTS`) it appends
them at the key's end as a segment of their own instead of among every term's postings,
which rewrote most of the table's pages at every merge (a search seeks each term once
per merge of its namespace: :func:`postings_of`). Once a write brings the tail to its
bound (``lexical_merge.merge_due``), the store merges it beside the writers where it can
(``Tail.merge``: SQLite's thread, ``lexical_merge.merge_beside``, which makes the postings before
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

The lane's rooms: this module (the tables' names, the documents' form, BM25 and the
search), :mod:`~erstwhile.store.sql.lexical_writes` (a transaction's changes),
:mod:`~erstwhile.store.sql.lexical_index` (a namespace indexed anew, the checks);
SQLite's tail under :mod:`erstwhile.store.sqlite`: :mod:`~erstwhile.store.sqlite.lexical_tail`
(the process's copy of it) and :mod:`~erstwhile.store.sqlite.lexical_merge` (its merges).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from erstwhile.domain.records import Record
from erstwhile.domain.words import DEFAULT_LANGUAGE, LANGUAGES, query_terms
from erstwhile.store.base import LexicalHits
from erstwhile.store.sql.dialect import Dialect, Lane, TailPostings, Tx, chunks
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
#: :data:`SEGMENTS` yet, so in no search (``lexical_merge.merge_beside``):
#: ``(namespace, seg)``.
PENDING = "lexical_pending"
#: The tail's first and last seq (each its own min or max: SQLite reads one end of the
#: key for each, where ``min(seq), max(seq)`` in one SELECT would read every row).
TAIL_ENDS = f"SELECT (SELECT min(seq) FROM {TAIL}), (SELECT max(seq) FROM {TAIL})"
#: Each record's terms (where the dialect keeps a tail, or says so): ``(record, namespace,
#: terms, length)``, the terms space-separated, each as often as the content holds it.
DOCUMENTS = "lexical_docs"
#: The index of replaced versions by record, which a known_at ranking reads them by.
_BY_RECORD = "record_past_record"
#: A record's terms with their counts, and its length in terms.
Document = tuple[Counter[str], int]
#: A posting's columns, and a document's (:data:`DOCUMENTS`).
POSTING_COLUMNS = ("namespace", "term", "record", "tf", "length")
DOCUMENT_COLUMNS = ("record", "namespace", "terms", "length")


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


def in_segments(segmented: bool, alias: str, namespace: str) -> str:
    """`` AND`` ``alias``'s seg is one of the merges of ``namespace`` (an expression)
    where the postings are keyed by merge, so that a lookup by namespace, term and
    record seeks once per merge; else nothing."""
    if not segmented:
        return ""
    return f" AND {alias}seg IN (SELECT seg FROM {SEGMENTS} WHERE namespace = {namespace})"


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


def split_terms(column: str) -> str:
    """A table of each term of ``column`` (a :func:`packed` document, never empty), one
    row per occurrence, its ``value`` the term: the terms quoted and joined with commas
    make a JSON array (a term, a run of letters and digits, holds no quote, backslash
    or control character that JSON would have escaped)."""
    return f"""json_each('["' || replace({column}, ' ', '","') || '"]')"""


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

"""The lexical lane's upkeep (:mod:`erstwhile.store.sql.lexical`): a namespace's
records indexed anew (a language change, a migration), the postings of past contents,
and the check that the lexical rows agree with the records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from erstwhile.domain.words import DEFAULT_LANGUAGE, term_counts
from erstwhile.store.sql.dialect import Dialect, Tx
from erstwhile.store.sql.lexical import (
    DOCUMENT_COLUMNS,
    DOCUMENTS,
    MAIN,
    PENDING,
    REINDEX_BATCH,
    SEGMENTS,
    TAIL,
    documented,
    in_segments,
    language,
)
from erstwhile.store.sql.lexical_writes import LexicalWrites, document_rows, insert_postings
from erstwhile.store.sql.maintenance import Finding


def tiers(d: Dialect) -> list[str]:
    """Where a namespace's current documents are (each record's in one): the postings
    table, and the tail where the dialect keeps one (for :func:`integrity`)."""
    return [MAIN] if d.lexical_tail is None else [MAIN, TAIL]


def index_past_of(tx: Tx, namespace: str, language: str) -> None:
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
        insert_postings(tx, namespace, {int(rowid): document}, content_hash=content_hash)


def index_past(tx: Tx) -> None:
    """Postings for every past content of every namespace, in its language (a
    migration)."""
    names = tx.execute("SELECT DISTINCT namespace FROM record_past").fetchall()
    for (namespace,) in sorted(names):
        index_past_of(tx, namespace, language(tx, namespace))


def reindex(tx: Tx, namespace: str, language: str, d: Dialect | None = None) -> None:
    """Indexes every record of ``namespace`` anew in ``language`` (in ``tx``; ``d``:
    the store's dialect, whose tail is merged first, so the namespace's documents are
    all in :data:`MAIN` and no copy of the tail holds one; without it, at a migration
    before there was a tail)."""
    if d is not None and d.lexical_tail is not None:
        d.lexical_tail.merge_all(d, tx)
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
        insert_postings(tx, namespace, batch)
        if documented(d):
            tx.executemany(
                f"INSERT INTO {DOCUMENTS} ({', '.join(DOCUMENT_COLUMNS)}) VALUES (?, ?, ?, ?)",
                document_rows(namespace, batch),
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
    if LexicalWrites(d, tx, namespace).language(exclusive=True) == wanted:
        return False
    reindex(tx, namespace, wanted, d)
    index_past_of(tx, namespace, wanted)
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
         f" WHERE p.namespace = s.namespace{in_segments(segments, 'p.', 's.namespace')}"
         f" GROUP BY p.record) x){tail_length}"),
        ("terms whose record count is off",  # the tail's documents count once merged
         "SELECT count(*) FROM lexical_terms t WHERE t.df <> "
         f"(SELECT count(*) FROM {MAIN} p WHERE p.namespace = t.namespace"
         f"{in_segments(segments, 'p.', 't.namespace')} AND p.term = t.term)"),
        ("namespaces with records and no statistics",
         "SELECT count(DISTINCT r.namespace) FROM records r WHERE NOT EXISTS"
         " (SELECT 1 FROM lexical_stats s WHERE s.namespace = r.namespace)"),
    )  # fmt: skip
    if tail:
        checks += (
            ("documents of the tail with postings too",
             f"SELECT count(*) FROM {DOCUMENTS} x WHERE {in_tail} AND EXISTS (SELECT 1"
             f" FROM {MAIN} p WHERE p.namespace = x.namespace AND p.record = x.record"
             f"{in_segments(segments, 'p.', 'x.namespace')}"
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
             f"{in_segments(segments, 'p.', 's.namespace')})"),
        )  # fmt: skip
    for label, sql in checks:
        count = read(sql)[0][0]
        if count:
            found.problems.append(f"{count} {label}")
    return found

"""The SQLite store's DDL: its migrations, run by the shared runner
(:mod:`erstwhile.store.sql.migrate`), each in its own ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from erstwhile.store.sql import graph, lexical, lexical_index, migrate, past
from erstwhile.store.sql.migrate import Migration, run_script

MIGRATIONS: list[tuple[str, Migration]] = []
migration = migrate.registrar(MIGRATIONS)


@migration
def m001_records(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE namespaces (
            name        TEXT PRIMARY KEY,
            created_at  INTEGER NOT NULL
        );

        -- The current state of every record; older states live in record_versions.
        CREATE TABLE records (
            -- AUTOINCREMENT: a rowid is never reused, so derived rows keyed by it
            -- (and in-memory vector caches) can never be mistaken for a newer record.
            rowid         INTEGER PRIMARY KEY AUTOINCREMENT,
            -- Scope columns first, bulky ones last: SQLite reads a row's columns in
            -- order, so filters never walk past the content's overflow pages.
            namespace     TEXT NOT NULL,
            id            TEXT NOT NULL,
            valid_from    INTEGER NOT NULL,
            valid_to      INTEGER,
            deleted_at    INTEGER,
            created_at    INTEGER NOT NULL,
            updated_at    INTEGER NOT NULL,
            trust         TEXT NOT NULL,
            kind          TEXT NOT NULL,
            key           TEXT,
            superseded_by TEXT,
            version       INTEGER NOT NULL,
            content_hash  TEXT NOT NULL,
            source        TEXT,
            origin        TEXT,
            supersedes    TEXT NOT NULL,
            tags          TEXT NOT NULL,
            metadata      TEXT NOT NULL,
            content       TEXT NOT NULL,
            payload       BLOB,
            UNIQUE (namespace, id)
        );
        -- Covers the temporal clause, so a namespace-wide scope never reads the table.
        CREATE INDEX records_ns_valid ON records (namespace, valid_from, valid_to, deleted_at);
        CREATE INDEX records_ns_created ON records (namespace, created_at);
        CREATE INDEX records_ns_key ON records (namespace, key) WHERE key IS NOT NULL;
        CREATE INDEX records_ns_kind ON records (namespace, kind);
        CREATE INDEX records_ns_superseded_by ON records (namespace, superseded_by)
            WHERE superseded_by IS NOT NULL;

        -- Every version of every record, verbatim, until a hard delete.
        CREATE TABLE record_versions (
            namespace  TEXT NOT NULL,
            id         TEXT NOT NULL,
            version    INTEGER NOT NULL,
            body       TEXT NOT NULL,
            payload    BLOB,
            PRIMARY KEY (namespace, id, version)
        ) WITHOUT ROWID;

        -- Scope helpers kept in step with records: tags and metadata as rows, so
        -- filters are index look-ups rather than JSON scans.
        CREATE TABLE record_tags (
            record  INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            tag     TEXT NOT NULL,
            PRIMARY KEY (tag, record)
        ) WITHOUT ROWID;
        CREATE INDEX record_tags_record ON record_tags (record);

        CREATE TABLE record_meta (
            record  INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            key     TEXT NOT NULL,
            value   TEXT NOT NULL,
            num     REAL,
            PRIMARY KEY (key, value, record)
        ) WITHOUT ROWID;
        CREATE INDEX record_meta_record ON record_meta (record);
        CREATE INDEX record_meta_num ON record_meta (key, num) WHERE num IS NOT NULL;

        CREATE VIRTUAL TABLE records_fts USING fts5 (
            content, tokenize = 'unicode61 remove_diacritics 2'
        );

        -- Derived: one unit vector (float32, little-endian) per (record, embedder).
        -- A rowid table with a narrow unique index: "does this record have a vector?"
        -- is answered from the index without reading the 1-6 KB blobs.
        -- seq grows with every write, so a reader can fetch only what changed.
        CREATE TABLE vectors (
            record       INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            embedder_id  TEXT NOT NULL,
            seq          INTEGER NOT NULL,
            dimensions   INTEGER NOT NULL,
            vector       BLOB NOT NULL
        );
        CREATE UNIQUE INDEX vectors_record ON vectors (record, embedder_id);
        CREATE INDEX vectors_seq ON vectors (embedder_id, seq);
        CREATE INDEX vectors_seq_all ON vectors (seq);

        -- Durable jobs (embed, reindex): state and counts; the records are the cursor.
        CREATE TABLE jobs (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            type        TEXT NOT NULL,
            namespace   TEXT NOT NULL,
            state       TEXT NOT NULL,
            done        INTEGER NOT NULL DEFAULT 0,
            error       TEXT,
            created_at  INTEGER NOT NULL,
            updated_at  INTEGER NOT NULL
        );
        CREATE INDEX jobs_ns_state ON jobs (namespace, type, state);

        -- Derived: the knowledge graph (filled by extraction; asserted facts too).
        CREATE TABLE entities (
            namespace  TEXT NOT NULL,
            id         TEXT NOT NULL,
            name       TEXT NOT NULL,
            kind       TEXT NOT NULL,
            aliases    TEXT NOT NULL DEFAULT '[]',
            created_at INTEGER NOT NULL,
            PRIMARY KEY (namespace, id)
        );
        CREATE TABLE mentions (
            record     INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            namespace  TEXT NOT NULL,
            entity     TEXT NOT NULL,
            spelling   TEXT NOT NULL,
            provenance TEXT,
            PRIMARY KEY (record, entity)
        ) WITHOUT ROWID;
        CREATE INDEX mentions_entity ON mentions (namespace, entity);
        CREATE TABLE relations (
            namespace   TEXT NOT NULL,
            id          TEXT NOT NULL,
            subject     TEXT NOT NULL,
            predicate   TEXT NOT NULL,
            object      TEXT NOT NULL,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            confidence  REAL NOT NULL DEFAULT 1.0,
            provenance  TEXT,
            PRIMARY KEY (namespace, id)
        );
        CREATE INDEX relations_subject ON relations (namespace, subject);
        CREATE INDEX relations_object ON relations (namespace, object);
        CREATE TABLE possibly_same_as (
            namespace  TEXT NOT NULL,
            a          TEXT NOT NULL,
            b          TEXT NOT NULL,
            PRIMARY KEY (namespace, a, b)
        );
        CREATE TABLE extraction_markers (
            record     INTEGER PRIMARY KEY REFERENCES records (rowid) ON DELETE CASCADE,
            extractor  TEXT NOT NULL,
            at         INTEGER NOT NULL
        );

        -- Access tokens: only the SHA-256 digest of each secret is kept.
        CREATE TABLE tokens (
            id           TEXT PRIMARY KEY,
            name         TEXT NOT NULL,
            digest       TEXT NOT NULL UNIQUE,
            capabilities TEXT NOT NULL,
            namespaces   TEXT NOT NULL,
            disabled     INTEGER NOT NULL DEFAULT 0,
            created_at   INTEGER NOT NULL
        );

        -- Append-only: every mutation, in order.
        CREATE TABLE ledger (
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            at         INTEGER NOT NULL,
            op         TEXT NOT NULL,
            namespace  TEXT NOT NULL,
            record_id  TEXT NOT NULL,
            version    INTEGER,
            actor      TEXT NOT NULL,
            detail     TEXT
        );
        CREATE INDEX ledger_record ON ledger (namespace, record_id);
        """,
    )


@migration
def m002_scope_rows_carry_validity(conn: sqlite3.Connection) -> None:
    """Tag and metadata rows carry their record's namespace and validity, so a filtered
    scope is one range of one index: no look-up into ``records`` per member row."""
    run_script(
        conn,
        """
        CREATE TABLE record_tags_v2 (
            namespace   TEXT NOT NULL,
            tag         TEXT NOT NULL,
            record      INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            deleted_at  INTEGER,
            PRIMARY KEY (namespace, tag, record)
        ) WITHOUT ROWID;
        INSERT INTO record_tags_v2
            SELECT r.namespace, t.tag, t.record, r.valid_from, r.valid_to, r.deleted_at
            FROM record_tags t JOIN records r ON r.rowid = t.record;
        DROP TABLE record_tags;
        ALTER TABLE record_tags_v2 RENAME TO record_tags;
        CREATE INDEX record_tags_record ON record_tags (record);

        CREATE TABLE record_meta_v2 (
            namespace   TEXT NOT NULL,
            key         TEXT NOT NULL,
            value       TEXT NOT NULL,
            record      INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            num         REAL,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            deleted_at  INTEGER,
            PRIMARY KEY (namespace, key, value, record)
        ) WITHOUT ROWID;
        INSERT INTO record_meta_v2
            SELECT r.namespace, m.key, m.value, m.record, m.num,
                   r.valid_from, r.valid_to, r.deleted_at
            FROM record_meta m JOIN records r ON r.rowid = m.record;
        DROP TABLE record_meta;
        ALTER TABLE record_meta_v2 RENAME TO record_meta;
        CREATE INDEX record_meta_record ON record_meta (record);
        CREATE INDEX record_meta_num ON record_meta (namespace, key, num) WHERE num IS NOT NULL;
        """,
    )


@migration
def m003_vector_seq_counter(conn: sqlite3.Connection) -> None:
    """A counter for ``vectors.seq`` that never goes back, even when the newest vector
    is removed by a hard delete."""
    run_script(
        conn,
        """
        CREATE TABLE vector_seq (value INTEGER NOT NULL);
        INSERT INTO vector_seq SELECT coalesce(max(seq), 0) FROM vectors;
        """,
    )


@migration
def m004_job_owner(conn: sqlite3.Connection) -> None:
    """Which process runs a job ("host:pid"), so a job whose process died can be told
    from one still running."""
    conn.execute("ALTER TABLE jobs ADD COLUMN owner TEXT")


@migration
def m005_graph_evidence(conn: sqlite3.Connection) -> None:
    """An extracted edge names the record that evidences it (so a sweep or a hard
    delete finds it by index); a marker carries its namespace and the content it read
    (so a record rewritten in place is read again)."""
    run_script(
        conn,
        """
        ALTER TABLE relations ADD COLUMN record TEXT;
        CREATE INDEX relations_record ON relations (namespace, record) WHERE record IS NOT NULL;
        CREATE INDEX relations_open ON relations (namespace) WHERE record IS NOT NULL
            AND valid_to IS NULL;
        ALTER TABLE extraction_markers ADD COLUMN namespace TEXT;
        ALTER TABLE extraction_markers ADD COLUMN content_hash TEXT;
        CREATE INDEX mentions_ns_record ON mentions (namespace, record);
        """,
    )


@migration
def m006_scope_log(conn: sqlite3.Connection) -> None:
    """A change sequence of records: every insert, update and delete of a record row
    appends its rowid, so a process's in-memory copy of the scope columns
    (:mod:`erstwhile.store.sqlite.scope_cache`) can catch up on exactly what changed.
    Tags and metadata change only with their record's row (``Writes.save``). Rows are
    only appended: ``seq`` (max + 1) then never goes back."""
    run_script(
        conn,
        """
        CREATE TABLE scope_log (seq INTEGER PRIMARY KEY, record INTEGER NOT NULL);
        CREATE TRIGGER records_scope_insert AFTER INSERT ON records
            BEGIN INSERT INTO scope_log (record) VALUES (NEW.rowid); END;
        CREATE TRIGGER records_scope_update AFTER UPDATE ON records
            BEGIN INSERT INTO scope_log (record) VALUES (NEW.rowid); END;
        CREATE TRIGGER records_scope_delete AFTER DELETE ON records
            BEGIN INSERT INTO scope_log (record) VALUES (OLD.rowid); END;
        """,
    )


@migration
def m007_lexical_postings(conn: sqlite3.Connection) -> None:
    """The lexical lane's own tables (:mod:`erstwhile.store.sql.lexical`) replace FTS5:
    BM25 with each namespace's own statistics, the same terms and scores as on
    PostgreSQL. Every record is indexed here, in this migration's transaction."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_postings (
            namespace  TEXT NOT NULL,
            term       TEXT NOT NULL,
            record     INTEGER NOT NULL,
            tf         INTEGER NOT NULL,
            length     INTEGER NOT NULL,
            PRIMARY KEY (namespace, term, record)
        ) WITHOUT ROWID;
        CREATE INDEX lexical_postings_record ON lexical_postings (namespace, record);
        CREATE TABLE lexical_terms (
            namespace  TEXT NOT NULL,
            term       TEXT NOT NULL,
            df         INTEGER NOT NULL,
            PRIMARY KEY (namespace, term)
        ) WITHOUT ROWID;
        CREATE TABLE lexical_stats (
            namespace  TEXT PRIMARY KEY,
            language   TEXT NOT NULL,
            documents  INTEGER NOT NULL,
            length     INTEGER NOT NULL
        );
        DROP TABLE records_fts;
        """,
    )
    lexical_index.index_all(conn)


@migration
def m008_record_time(conn: sqlite3.Connection) -> None:
    """Record time travel (``known_at``): each replaced version of a record as a row
    of ``record_past`` with its record-time range ``[known_from, known_to)``, its scope
    rows, and the vectors of contents a record no longer holds. The current version
    stays in ``records`` (known from its ``updated_at``)."""
    run_script(
        conn,
        """
        CREATE TABLE record_past (
            rowid         INTEGER PRIMARY KEY AUTOINCREMENT,
            record        INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            known_from    INTEGER NOT NULL,
            known_to      INTEGER NOT NULL,
            namespace     TEXT NOT NULL,
            id            TEXT NOT NULL,
            valid_from    INTEGER NOT NULL,
            valid_to      INTEGER,
            deleted_at    INTEGER,
            created_at    INTEGER NOT NULL,
            updated_at    INTEGER NOT NULL,
            trust         TEXT NOT NULL,
            kind          TEXT NOT NULL,
            key           TEXT,
            superseded_by TEXT,
            version       INTEGER NOT NULL,
            content_hash  TEXT NOT NULL,
            source        TEXT,
            origin        TEXT,
            supersedes    TEXT NOT NULL,
            tags          TEXT NOT NULL,
            metadata      TEXT NOT NULL,
            content       TEXT NOT NULL,
            payload       BLOB
        );
        CREATE INDEX record_past_ns_known ON record_past (namespace, known_to, known_from);
        CREATE INDEX record_past_record ON record_past (record);
        CREATE TABLE past_tags (
            namespace   TEXT NOT NULL,
            tag         TEXT NOT NULL,
            record      INTEGER NOT NULL REFERENCES record_past (rowid) ON DELETE CASCADE,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            deleted_at  INTEGER,
            PRIMARY KEY (namespace, tag, record)
        ) WITHOUT ROWID;
        CREATE INDEX past_tags_record ON past_tags (record);
        CREATE TABLE past_meta (
            namespace   TEXT NOT NULL,
            key         TEXT NOT NULL,
            value       TEXT NOT NULL,
            record      INTEGER NOT NULL REFERENCES record_past (rowid) ON DELETE CASCADE,
            num         REAL,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            deleted_at  INTEGER,
            PRIMARY KEY (namespace, key, value, record)
        ) WITHOUT ROWID;
        CREATE INDEX past_meta_record ON past_meta (record);
        CREATE INDEX past_meta_num ON past_meta (namespace, key, num) WHERE num IS NOT NULL;
        -- a vector of a content the record held before (by its hash), kept when the
        -- content changed, for known_at searches of that time
        CREATE TABLE past_vectors (
            record       INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            content_hash TEXT NOT NULL,
            embedder_id  TEXT NOT NULL,
            dimensions   INTEGER NOT NULL,
            vector       BLOB NOT NULL,
            PRIMARY KEY (record, content_hash, embedder_id)
        ) WITHOUT ROWID;
        """,
    )
    past.backfill(conn)


@migration
def m009_record_time_postings_and_graph(conn: sqlite3.Connection) -> None:
    """Record time for the lexical lane and the graph. ``past_postings`` holds the
    postings of each content a record held before (by its hash), so a ``known_at``
    lexical search ranks past versions in SQL as it ranks current ones. Mentions and
    edges get ``known_from`` (when recorded); a retracted mention and an edge's
    replaced version move to ``past_mentions`` / ``past_relations`` with their
    record-time range, so expansion can walk the graph as known at an instant.
    Before this migration the graph kept no record time: each mention and edge counts
    as known from the latest instant its rows show it could not have been missing
    (its record's creation or extraction, its entities' creation)."""
    run_script(
        conn,
        """
        CREATE TABLE past_postings (
            namespace    TEXT NOT NULL,
            term         TEXT NOT NULL,
            record       INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            content_hash TEXT NOT NULL,
            tf           INTEGER NOT NULL,
            length       INTEGER NOT NULL,
            PRIMARY KEY (namespace, term, record, content_hash)
        ) WITHOUT ROWID;
        CREATE INDEX record_past_id ON record_past (namespace, id);
        CREATE INDEX past_postings_record ON past_postings (record);
        ALTER TABLE mentions ADD COLUMN known_from INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE relations ADD COLUMN known_from INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE past_mentions (
            record     INTEGER NOT NULL REFERENCES records (rowid) ON DELETE CASCADE,
            namespace  TEXT NOT NULL,
            entity     TEXT NOT NULL,
            spelling   TEXT NOT NULL,
            provenance TEXT,
            known_from INTEGER NOT NULL,
            known_to   INTEGER NOT NULL
        );
        CREATE INDEX past_mentions_record ON past_mentions (namespace, record);
        CREATE INDEX past_mentions_entity ON past_mentions (namespace, entity);
        CREATE TABLE past_relations (
            namespace   TEXT NOT NULL,
            record      TEXT,
            id          TEXT NOT NULL,
            subject     TEXT NOT NULL,
            predicate   TEXT NOT NULL,
            object      TEXT NOT NULL,
            valid_from  INTEGER NOT NULL,
            valid_to    INTEGER,
            confidence  REAL NOT NULL,
            provenance  TEXT,
            known_from  INTEGER NOT NULL,
            known_to    INTEGER NOT NULL
        );
        CREATE INDEX past_relations_subject ON past_relations (namespace, subject);
        CREATE INDEX past_relations_object ON past_relations (namespace, object);
        CREATE INDEX past_relations_record ON past_relations (namespace, record)
            WHERE record IS NOT NULL;
        """,
    )
    graph.backfill_known_from(conn)
    lexical_index.index_past(conn)


@migration
def m010_fresh_postings(conn: sqlite3.Connection) -> None:
    """New postings go to a small table of their own, merged into ``lexical_postings``
    now and then (:mod:`erstwhile.store.sql.lexical`): a batch then rewrites a few of
    its pages rather than a page of ``lexical_postings`` per distinct term."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_fresh (
            namespace  TEXT NOT NULL,
            term       TEXT NOT NULL,
            record     INTEGER NOT NULL,
            tf         INTEGER NOT NULL,
            length     INTEGER NOT NULL,
            PRIMARY KEY (namespace, term, record)
        ) WITHOUT ROWID;
        CREATE INDEX lexical_fresh_record ON lexical_fresh (namespace, record);
        -- the postings written to lexical_fresh since it was last merged (removed
        -- ones included): a write learns whether to merge without counting them
        CREATE TABLE lexical_fresh_written (rows INTEGER NOT NULL);
        INSERT INTO lexical_fresh_written (rows) VALUES (0);
        """,
    )


@migration
def m011_lexical_documents(conn: sqlite3.Connection) -> None:
    """Each record's terms as one row of ``lexical_docs`` (:mod:`erstwhile.store.sql.lexical`),
    by which a record's postings are found when its content is replaced or removed: the
    two postings tables lose their index by record, which every batch and every merge
    of fresh postings paid for as much as for the postings themselves. Filled here from
    the postings."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_docs (
            record     INTEGER PRIMARY KEY,
            namespace  TEXT NOT NULL,
            terms      TEXT NOT NULL,
            length     INTEGER NOT NULL
        );
        """,
    )
    documents: dict[int, tuple[str, Counter[str], int]] = {}
    for table in (lexical.MAIN, "lexical_fresh"):
        rows = conn.execute(f"SELECT namespace, term, record, tf, length FROM {table}")
        for namespace, term, record, tf, length in rows:
            found = documents.get(record)
            if found is None:
                found = documents[record] = (namespace, Counter(), int(length))
            found[1][term] = int(tf)
    conn.executemany(
        "INSERT INTO lexical_docs (record, namespace, terms, length) VALUES (?, ?, ?, ?)",
        [(record, ns, lexical.packed(counts), length)
         for record, (ns, counts, length) in sorted(documents.items())],
    )  # fmt: skip
    run_script(
        conn,
        """
        DROP INDEX lexical_postings_record;
        DROP INDEX lexical_fresh_record;
        """,
    )


@migration
def m012_lexical_tail(conn: sqlite3.Connection) -> None:
    """A write's documents wait in ``lexical_docs`` alone, with no postings, until merged
    (:mod:`erstwhile.store.sql.lexical`): ``lexical_tail`` lists them, and a search
    scores them itself. The fresh postings are merged here, and their table goes;
    ``vectors_seq_all`` goes too (nothing reads vectors by seq across embedders)."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_tail (
            seq     INTEGER PRIMARY KEY AUTOINCREMENT,
            record  INTEGER NOT NULL
        );
        INSERT INTO lexical_terms (namespace, term, df)
            SELECT namespace, term, count(*) FROM lexical_fresh WHERE true
            GROUP BY namespace, term
            ON CONFLICT (namespace, term) DO UPDATE SET df = lexical_terms.df + excluded.df;
        INSERT INTO lexical_postings (namespace, term, record, tf, length)
            SELECT namespace, term, record, tf, length FROM lexical_fresh
            ORDER BY namespace, term, record;
        DROP TABLE lexical_fresh;
        DROP TABLE lexical_fresh_written;
        DROP INDEX vectors_seq_all;
        """,
    )


@migration
def m013_scope_log_without_insert_trigger(conn: sqlite3.Connection) -> None:
    """A new record's rowid is appended to ``scope_log`` by the statement after its
    insert (``SqliteDialect.insert_record``: a batch's in one executemany) rather than
    by a trigger run once per row, which cost a fifth of the records insert. Updates
    and deletes keep their triggers (they come one record at a time, from several
    places)."""
    run_script(conn, "DROP TRIGGER records_scope_insert")


@migration
def m014_versions_from_the_past(conn: sqlite3.Connection) -> None:
    """A record's versions are its row and its past (:func:`past.drop_versions`)."""
    past.drop_versions(conn)


@migration
def m015_lexical_segments(conn: sqlite3.Connection) -> None:
    """``lexical_postings`` is keyed by the merge that wrote each posting after the
    namespace (``seg``), and ``lexical_segments`` lists each namespace's merges
    (:mod:`erstwhile.store.sql.lexical`): a merge then appends its postings at the end
    of the key instead of among every term's, which rewrote most of the table's pages
    (at 100k records a merge wrote 3,182 WAL pages against 669). The postings there
    are merge 0's."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_postings_by_merge (
            namespace  TEXT NOT NULL,
            seg        INTEGER NOT NULL DEFAULT 0,
            term       TEXT NOT NULL,
            record     INTEGER NOT NULL,
            tf         INTEGER NOT NULL,
            length     INTEGER NOT NULL,
            PRIMARY KEY (namespace, seg, term, record)
        ) WITHOUT ROWID;
        INSERT INTO lexical_postings_by_merge (namespace, seg, term, record, tf, length)
            SELECT namespace, 0, term, record, tf, length FROM lexical_postings
            ORDER BY namespace, term, record;
        DROP TABLE lexical_postings;
        ALTER TABLE lexical_postings_by_merge RENAME TO lexical_postings;
        CREATE TABLE lexical_segments (
            namespace  TEXT NOT NULL,
            seg        INTEGER NOT NULL,
            PRIMARY KEY (namespace, seg)
        ) WITHOUT ROWID;
        INSERT INTO lexical_segments (namespace, seg)
            SELECT namespace, 0 FROM lexical_stats;
        """,
    )


@migration
def m016_lexical_pending(conn: sqlite3.Connection) -> None:
    """``lexical_pending`` lists the segments a merge beside the writers is copying
    into ``lexical_postings`` before it lists them in ``lexical_segments``
    (:func:`erstwhile.store.sqlite.lexical_merge.merge_beside`)."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_pending (
            namespace  TEXT NOT NULL,
            seg        INTEGER NOT NULL,
            PRIMARY KEY (namespace, seg)
        ) WITHOUT ROWID;
        """,
    )


@migration
def m017_vector_copies(conn: sqlite3.Connection) -> None:
    """The commit points of the vector matrices saved beside the file
    (:mod:`erstwhile.store.sqlite.vector_file`): ``vector_copies`` names each embedder's
    adoptable copy (its files' token, the seq it holds every vector up to, its rows and
    their checksum), and ``vector_erasures`` logs each hard-deleted record under a new
    ``vectors.seq`` (its vector rows go with it), so every process's matrix drops it."""
    run_script(
        conn,
        """
        CREATE TABLE vector_copies (
            embedder_id  TEXT PRIMARY KEY,
            token        TEXT NOT NULL,
            seq          INTEGER NOT NULL,
            count        INTEGER NOT NULL,
            dimensions   INTEGER NOT NULL,
            checksum     INTEGER NOT NULL,
            format       INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE vector_erasures (
            seq     INTEGER PRIMARY KEY,
            record  INTEGER NOT NULL
        );
        """,
    )


@migration
def m018_job_usage(conn: sqlite3.Connection) -> None:
    """An extract job's provider figures (``usage``, JSON: calls, retries, failures,
    unreadable answers, tokens, time; :mod:`erstwhile.extraction.usage`) and why a job
    that ended ``done`` stopped before its backlog was empty (``stopped``: its budget)."""
    conn.execute("ALTER TABLE jobs ADD COLUMN usage TEXT")
    conn.execute("ALTER TABLE jobs ADD COLUMN stopped TEXT")


@migration
def m019_vectors_follow_scope_log(conn: sqlite3.Connection) -> None:
    """The vector matrix follows ``scope_log`` like every other copy of this file
    (:mod:`erstwhile.store.sqlite.vectors`): a write of a vector row that changes no
    record row logs its record there itself. ``vectors.seq``, its counter and index, and
    ``vector_erasures`` (a hard delete's record row leaves ``scope_log`` an entry whose
    record is gone) go; so do the recorded copies, which name seqs of the old feed (their
    files are swept by the next save, or removed by a hard delete)."""
    run_script(
        conn,
        """
        DROP INDEX vectors_seq;
        ALTER TABLE vectors DROP COLUMN seq;
        DROP TABLE vector_seq;
        DROP TABLE vector_erasures;
        DELETE FROM vector_copies;
        """,
    )


def apply_migrations(conn: sqlite3.Connection, now: int) -> list[str]:
    """Applies what is missing, each in its own transaction. Returns the names applied."""

    @contextmanager
    def step() -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    return migrate.apply(conn, MIGRATIONS, now, step)

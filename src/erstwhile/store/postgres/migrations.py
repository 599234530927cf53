"""The PostgreSQL store's DDL: its migrations, run by the shared runner
(:mod:`erstwhile.store.sql.migrate`). Opening a database runs what is missing, all
in one transaction under an advisory lock, so two processes starting together apply
each migration exactly once (DDL is transactional in PostgreSQL).

Every table that holds a namespace's data carries ``namespace`` in its primary key
and in its foreign keys, so the schema distributes by namespace on Citus unchanged
(see docs/postgres.md). Instants are BIGINT microseconds since the epoch, as on
SQLite. Free text that an index would have to hold whole (tags, metadata values,
keys) is indexed through ``md5(…)``: a B-tree entry cannot exceed ~2.7 kB.
"""

from __future__ import annotations

from contextlib import nullcontext

from psycopg import errors

from erstwhile.domain.errors import InvalidInput
from erstwhile.store.postgres import citus
from erstwhile.store.postgres.connection import Connection
from erstwhile.store.sql import graph, lexical_index, migrate, past
from erstwhile.store.sql.migrate import Migration, run_script

MIGRATIONS: list[tuple[str, Migration]] = []
migration = migrate.registrar(MIGRATIONS)
_LOCK = "erstwhile.migrate"


@migration
def m001_records(conn: Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE namespaces (
            name         text COLLATE "C" PRIMARY KEY,
            created_at   bigint NOT NULL,
            -- the namespace's text-search configuration: recorded for later; today
            -- the lexical lane indexes unicode61 tokens as is, like 'simple'
            text_search  text NOT NULL DEFAULT 'simple'
        );

        -- The current state of every record; older states live in record_versions.
        CREATE TABLE records (
            -- never reused: derived rows keyed by it cannot be mistaken for a newer record
            rowid         bigint GENERATED ALWAYS AS IDENTITY,
            namespace     text COLLATE "C" NOT NULL,
            id            text COLLATE "C" NOT NULL,
            content       text NOT NULL,
            content_hash  text NOT NULL,
            payload       bytea,
            metadata      text NOT NULL,
            tags          text NOT NULL,
            kind          text COLLATE "C" NOT NULL,
            key           text COLLATE "C",
            trust         text NOT NULL,
            source        text,
            origin        text,
            created_at    bigint NOT NULL,
            updated_at    bigint NOT NULL,
            valid_from    bigint NOT NULL,
            valid_to      bigint,
            deleted_at    bigint,
            supersedes    text NOT NULL,
            superseded_by text COLLATE "C",
            version       integer NOT NULL,
            tsv           tsvector NOT NULL,
            PRIMARY KEY (namespace, rowid),
            UNIQUE (namespace, id)
        );
        CREATE INDEX records_rowid ON records (rowid);
        CREATE INDEX records_ns_created ON records (namespace, created_at);
        -- live records (not tombstoned): what every search but include_historical scans
        CREATE INDEX records_ns_live ON records (namespace, valid_from, valid_to)
            WHERE deleted_at IS NULL;
        CREATE INDEX records_ns_key ON records (namespace, md5(key)) WHERE key IS NOT NULL;
        CREATE INDEX records_ns_kind ON records (namespace, kind);
        CREATE INDEX records_ns_superseded_by ON records (namespace, superseded_by)
            WHERE superseded_by IS NOT NULL;
        CREATE INDEX records_tsv ON records USING gin (tsv);

        -- Every version of every record, verbatim, until a hard delete.
        CREATE TABLE record_versions (
            namespace  text COLLATE "C" NOT NULL,
            id         text COLLATE "C" NOT NULL,
            version    integer NOT NULL,
            body       text NOT NULL,
            payload    bytea,
            PRIMARY KEY (namespace, id, version)
        );

        -- Scope helpers kept in step with records: tags and metadata as rows.
        CREATE TABLE record_tags (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            tag        text COLLATE "C" NOT NULL,
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX record_tags_record ON record_tags (namespace, record);
        CREATE INDEX record_tags_tag ON record_tags (namespace, md5(tag), record);

        CREATE TABLE record_meta (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            key        text COLLATE "C" NOT NULL,
            value      text COLLATE "C" NOT NULL,
            num        double precision,
            PRIMARY KEY (namespace, record, key),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX record_meta_value ON record_meta (namespace, key, md5(value), record);
        CREATE INDEX record_meta_num ON record_meta (namespace, key, num)
            WHERE num IS NOT NULL;

        -- Derived: one unit vector per (record, embedder). The column has no fixed
        -- dimension; a dimension gets its own partial HNSW index over
        -- embedding::vector(N) when a search first needs one (see vectors.py).
        CREATE TABLE vectors (
            namespace    text COLLATE "C" NOT NULL,
            record       bigint NOT NULL,
            embedder_id  text COLLATE "C" NOT NULL,
            dimensions   integer NOT NULL,
            embedding    vector NOT NULL CHECK (vector_dims(embedding) = dimensions),
            -- dimensions included: "which in-scope records have a vector" is index-only
            PRIMARY KEY (namespace, record, embedder_id) INCLUDE (dimensions),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );

        -- Durable jobs (embed, reindex): state and counts; the records are the cursor.
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            type        text NOT NULL,
            namespace   text COLLATE "C" NOT NULL,
            state       text NOT NULL,
            done        bigint NOT NULL DEFAULT 0,
            error       text,
            created_at  bigint NOT NULL,
            updated_at  bigint NOT NULL
        );
        CREATE INDEX jobs_ns_state ON jobs (namespace, type, state);

        -- Derived: the knowledge graph (filled by extraction; asserted facts too).
        CREATE TABLE entities (
            namespace  text COLLATE "C" NOT NULL,
            id         text COLLATE "C" NOT NULL,
            name       text NOT NULL,
            kind       text NOT NULL,
            aliases    text NOT NULL DEFAULT '[]',
            created_at bigint NOT NULL,
            PRIMARY KEY (namespace, id)
        );
        CREATE TABLE mentions (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            entity     text COLLATE "C" NOT NULL,
            spelling   text NOT NULL,
            provenance text,
            PRIMARY KEY (namespace, record, entity),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX mentions_entity ON mentions (namespace, entity);
        CREATE TABLE relations (
            namespace   text COLLATE "C" NOT NULL,
            id          text COLLATE "C" NOT NULL,
            subject     text COLLATE "C" NOT NULL,
            predicate   text NOT NULL,
            object      text COLLATE "C" NOT NULL,
            valid_from  bigint NOT NULL,
            valid_to    bigint,
            confidence  double precision NOT NULL DEFAULT 1.0,
            provenance  text,
            PRIMARY KEY (namespace, id)
        );
        CREATE INDEX relations_subject ON relations (namespace, subject);
        CREATE INDEX relations_object ON relations (namespace, object);
        CREATE TABLE possibly_same_as (
            namespace  text COLLATE "C" NOT NULL,
            a          text COLLATE "C" NOT NULL,
            b          text COLLATE "C" NOT NULL,
            PRIMARY KEY (namespace, a, b)
        );
        CREATE TABLE extraction_markers (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            extractor  text NOT NULL,
            at         bigint NOT NULL,
            PRIMARY KEY (namespace, record),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );

        -- Access tokens: only the SHA-256 digest of each secret is kept.
        CREATE TABLE tokens (
            id           text COLLATE "C" PRIMARY KEY,
            name         text NOT NULL,
            digest       text NOT NULL UNIQUE,
            capabilities text NOT NULL,
            namespaces   text NOT NULL,
            disabled     boolean NOT NULL DEFAULT false,
            created_at   bigint NOT NULL
        );

        -- Append-only: every mutation, in order.
        CREATE TABLE ledger (
            seq        bigint GENERATED ALWAYS AS IDENTITY,
            at         bigint NOT NULL,
            op         text NOT NULL,
            namespace  text COLLATE "C" NOT NULL,
            record_id  text COLLATE "C" NOT NULL,
            version    integer,
            actor      text NOT NULL,
            detail     text,
            PRIMARY KEY (namespace, seq)
        );
        CREATE INDEX ledger_seq ON ledger (seq);
        CREATE INDEX ledger_record ON ledger (namespace, record_id);
        """,
    )


@migration
def m002_job_owner(conn: Connection) -> None:
    """Which process runs a job ("host:pid"), so a job whose process died can be told
    from one still running."""
    conn.execute("ALTER TABLE jobs ADD COLUMN owner text")


@migration
def m003_scope_rows_carry_validity(conn: Connection) -> None:
    """Tag and metadata rows carry their record's validity, so a filtered scope is
    decided from those rows without a look-up into ``records`` per member."""
    for table in ("record_tags", "record_meta"):  # names from this code, not input
        run_script(
            conn,
            f"""
            ALTER TABLE {table} ADD COLUMN valid_from bigint,
                ADD COLUMN valid_to bigint, ADD COLUMN deleted_at bigint;
            UPDATE {table} m SET valid_from = r.valid_from, valid_to = r.valid_to,
                deleted_at = r.deleted_at
                FROM records r WHERE r.namespace = m.namespace AND r.rowid = m.record;
            ALTER TABLE {table} ALTER COLUMN valid_from SET NOT NULL;
            """,
        )


@migration
def m004_graph_evidence(conn: Connection) -> None:
    """An extracted edge names the record that evidences it (so a sweep or a hard
    delete finds it by index); a marker carries the content it read (so a record
    rewritten in place is read again)."""
    run_script(
        conn,
        """
        ALTER TABLE relations ADD COLUMN record text COLLATE "C";
        CREATE INDEX relations_record ON relations (namespace, record) WHERE record IS NOT NULL;
        CREATE INDEX relations_open ON relations (namespace) WHERE record IS NOT NULL
            AND valid_to IS NULL;
        ALTER TABLE extraction_markers ADD COLUMN content_hash text;
        """,
    )


@migration
def m005_lexical_postings(conn: Connection) -> None:
    """The lexical lane's own tables (:mod:`erstwhile.store.sql.lexical`) replace the
    tsvector column and its GIN index: BM25 with each namespace's own statistics, the
    same terms and scores as on SQLite. Every record is indexed here, in the
    migrations' transaction. (``namespaces.text_search`` was never read: the language
    now lives in ``lexical_stats``.)"""
    run_script(
        conn,
        """
        CREATE TABLE lexical_postings (
            namespace  text COLLATE "C" NOT NULL,
            term       text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            tf         integer NOT NULL,
            length     integer NOT NULL,
            PRIMARY KEY (namespace, term, record) INCLUDE (tf, length)
        );
        CREATE INDEX lexical_postings_record ON lexical_postings (namespace, record);
        CREATE TABLE lexical_terms (
            namespace  text COLLATE "C" NOT NULL,
            term       text COLLATE "C" NOT NULL,
            df         integer NOT NULL,
            PRIMARY KEY (namespace, term)
        );
        CREATE TABLE lexical_stats (
            namespace  text COLLATE "C" PRIMARY KEY,
            language   text NOT NULL,
            documents  bigint NOT NULL,
            length     bigint NOT NULL
        );
        DROP INDEX records_tsv;
        ALTER TABLE records DROP COLUMN tsv;
        ALTER TABLE namespaces DROP COLUMN text_search;
        """,
    )
    lexical_index.index_all(conn)


@migration
def m006_record_time(conn: Connection) -> None:
    """Record time travel (``known_at``): each replaced version of a record as a row
    of ``record_past`` with its record-time range ``[known_from, known_to)``, its scope
    rows, and the vectors of contents a record no longer holds.
    The current version stays in ``records`` (known from its ``updated_at``)."""
    run_script(
        conn,
        """
        CREATE TABLE record_past (
            rowid         bigint GENERATED ALWAYS AS IDENTITY,
            namespace     text COLLATE "C" NOT NULL,
            record        bigint NOT NULL,
            known_from    bigint NOT NULL,
            known_to      bigint NOT NULL,
            id            text COLLATE "C" NOT NULL,
            content       text NOT NULL,
            content_hash  text NOT NULL,
            payload       bytea,
            metadata      text NOT NULL,
            tags          text NOT NULL,
            kind          text COLLATE "C" NOT NULL,
            key           text COLLATE "C",
            trust         text NOT NULL,
            source        text,
            origin        text,
            created_at    bigint NOT NULL,
            updated_at    bigint NOT NULL,
            valid_from    bigint NOT NULL,
            valid_to      bigint,
            deleted_at    bigint,
            supersedes    text NOT NULL,
            superseded_by text COLLATE "C",
            version       integer NOT NULL,
            PRIMARY KEY (namespace, rowid),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX record_past_ns_known ON record_past (namespace, known_to, known_from);
        CREATE INDEX record_past_record ON record_past (namespace, record);
        CREATE TABLE past_tags (
            namespace   text COLLATE "C" NOT NULL,
            record      bigint NOT NULL,
            tag         text COLLATE "C" NOT NULL,
            valid_from  bigint NOT NULL,
            valid_to    bigint,
            deleted_at  bigint,
            FOREIGN KEY (namespace, record) REFERENCES record_past (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX past_tags_record ON past_tags (namespace, record);
        CREATE INDEX past_tags_tag ON past_tags (namespace, md5(tag), record);
        CREATE TABLE past_meta (
            namespace   text COLLATE "C" NOT NULL,
            record      bigint NOT NULL,
            key         text COLLATE "C" NOT NULL,
            value       text COLLATE "C" NOT NULL,
            num         double precision,
            valid_from  bigint NOT NULL,
            valid_to    bigint,
            deleted_at  bigint,
            PRIMARY KEY (namespace, record, key),
            FOREIGN KEY (namespace, record) REFERENCES record_past (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX past_meta_value ON past_meta (namespace, key, md5(value), record);
        -- a vector of a content the record held before (by its hash), kept when the
        -- content changed, for known_at searches of that time
        CREATE TABLE past_vectors (
            namespace    text COLLATE "C" NOT NULL,
            record       bigint NOT NULL,
            content_hash text NOT NULL,
            embedder_id  text COLLATE "C" NOT NULL,
            dimensions   integer NOT NULL,
            embedding    vector NOT NULL CHECK (vector_dims(embedding) = dimensions),
            PRIMARY KEY (namespace, record, content_hash, embedder_id),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        """,
    )
    past.backfill(conn)


@migration
def m007_record_time_postings_and_graph(conn: Connection) -> None:
    """Record time for the lexical lane and the graph, as on SQLite: ``past_postings``
    (the postings of contents a record held before, by hash), ``known_from`` on
    mentions and edges, and ``past_mentions`` / ``past_relations`` for retracted
    mentions and replaced edge versions with their record-time range. Existing
    mentions and edges count as known from the latest instant their rows show."""
    run_script(
        conn,
        """
        CREATE TABLE past_postings (
            namespace    text COLLATE "C" NOT NULL,
            term         text COLLATE "C" NOT NULL,
            record       bigint NOT NULL,
            content_hash text NOT NULL,
            tf           integer NOT NULL,
            length       integer NOT NULL,
            PRIMARY KEY (namespace, term, record, content_hash) INCLUDE (tf, length),
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX record_past_id ON record_past (namespace, id);
        CREATE INDEX past_postings_record ON past_postings (namespace, record);
        ALTER TABLE mentions ADD COLUMN known_from bigint NOT NULL DEFAULT 0;
        ALTER TABLE relations ADD COLUMN known_from bigint NOT NULL DEFAULT 0;
        CREATE TABLE past_mentions (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            entity     text COLLATE "C" NOT NULL,
            spelling   text NOT NULL,
            provenance text,
            known_from bigint NOT NULL,
            known_to   bigint NOT NULL,
            FOREIGN KEY (namespace, record) REFERENCES records (namespace, rowid)
                ON DELETE CASCADE
        );
        CREATE INDEX past_mentions_record ON past_mentions (namespace, record);
        CREATE INDEX past_mentions_entity ON past_mentions (namespace, entity);
        CREATE TABLE past_relations (
            namespace   text COLLATE "C" NOT NULL,
            record      text COLLATE "C",
            id          text COLLATE "C" NOT NULL,
            subject     text COLLATE "C" NOT NULL,
            predicate   text NOT NULL,
            object      text COLLATE "C" NOT NULL,
            valid_from  bigint NOT NULL,
            valid_to    bigint,
            confidence  double precision NOT NULL,
            provenance  text,
            known_from  bigint NOT NULL,
            known_to    bigint NOT NULL
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
def m008_covering_scope_indexes(conn: Connection) -> None:
    """A tag or metadata filter's scope is read from the index alone: the indexes
    by tag and by metadata value also carry what the scope tests besides the key
    (the exact text, the validity and the tombstone), so a filtered search reads
    no heap page of ``record_tags`` / ``record_meta`` once VACUUM has marked them
    visible (autovacuum does, after inserts too). Same keys, same lookups; each
    replaces the index it widens. (Measured at 100k rows, a scope of 8,000:
    docs/postgres.md.)"""
    run_script(
        conn,
        """
        DROP INDEX record_tags_tag;
        CREATE INDEX record_tags_tag ON record_tags (namespace, md5(tag), record)
            INCLUDE (tag, valid_from, valid_to, deleted_at);
        DROP INDEX record_meta_value;
        CREATE INDEX record_meta_value ON record_meta (namespace, key, md5(value), record)
            INCLUDE (value, valid_from, valid_to, deleted_at);
        """,
    )


#: How long a hard delete's keys stay in the drop logs: a scope copy not refreshed
#: for longer reloads whole (see m009).
DROPS_KEPT = "1 hour"


@migration
def m009_change_tracking(conn: Connection) -> None:
    """What changed since a snapshot, for the per-process scope copy
    (:mod:`erstwhile.store.postgres.scope_copy`): ``records`` and ``vectors`` carry the
    ``xid`` of the transaction that last wrote each row (the column's default on insert
    and COPY, a trigger on update), indexed per namespace (and embedder), and a hard
    delete leaves its rows' keys in ``record_drops`` / ``vector_drops`` (a
    statement-level trigger over the deleted rows: one INSERT per statement, however
    many rows). Rows written before this migration keep a NULL ``xid``: older than any
    snapshot a copy takes, and the column is added without rewriting the table.

    The drop logs are pruned by age inside the same trigger: entries older than
    ``DROPS_KEPT`` go, and ``drop_horizon`` records per namespace the newest ``xid``
    pruned, so a copy whose snapshot is older than that reloads whole instead of
    missing a delete."""
    run_script(
        conn,
        """
        ALTER TABLE records ADD COLUMN xid xid8;
        ALTER TABLE records ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
        ALTER TABLE vectors ADD COLUMN xid xid8;
        ALTER TABLE vectors ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
        CREATE INDEX records_ns_xid ON records (namespace, xid);
        CREATE INDEX vectors_ns_embedder_xid ON vectors (namespace, embedder_id, xid);
        CREATE TABLE record_drops (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
            dropped_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX record_drops_ns_xid ON record_drops (namespace, xid);
        CREATE TABLE vector_drops (
            namespace   text COLLATE "C" NOT NULL,
            record      bigint NOT NULL,
            embedder_id text COLLATE "C" NOT NULL,
            xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
            dropped_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX vector_drops_ns_xid ON vector_drops (namespace, embedder_id, xid);
        CREATE TABLE drop_horizon (
            namespace text COLLATE "C" NOT NULL PRIMARY KEY,
            below     xid8 NOT NULL
        )
        """,
    )
    if citus.active(conn):
        # Citus distributes no table with triggers, and one would run on the worker
        # (its xids, not the coordinator's): no change tracking there, and the scope
        # copy that reads it is off (PostgresDialect, docs/postgres.md "On Citus")
        return
    # function bodies hold ';' + newline: one statement each, not through run_script
    conn.execute(
        """
        CREATE FUNCTION erstwhile_stamp_xid() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            NEW.xid := pg_current_xact_id();
            RETURN NEW;
        END $$"""
    )
    for table, columns, keys in (
        ("record", "namespace, record", "namespace, rowid"),
        ("vector", "namespace, record, embedder_id", "namespace, record, embedder_id"),
    ):
        conn.execute(
            f"""
            CREATE FUNCTION erstwhile_{table}_drops() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
            BEGIN
                INSERT INTO {table}_drops ({columns}) SELECT {keys} FROM gone;
                -- prune by age, per namespace touched; the horizon says what went
                WITH old AS (
                    DELETE FROM {table}_drops d
                    WHERE d.namespace IN (SELECT DISTINCT g.namespace FROM gone g)
                      AND d.dropped_at < now() - interval '{DROPS_KEPT}'
                    RETURNING d.namespace, d.xid)
                INSERT INTO drop_horizon (namespace, below)
                SELECT namespace, max(xid) FROM old GROUP BY namespace
                ON CONFLICT (namespace) DO UPDATE
                SET below = greatest(drop_horizon.below, excluded.below);
                RETURN NULL;
            END $$"""
        )
    for table in ("records", "vectors"):
        conn.execute(
            f"CREATE TRIGGER {table}_stamp_xid BEFORE UPDATE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION erstwhile_stamp_xid()"
        )
        conn.execute(
            f"CREATE TRIGGER {table}_drops AFTER DELETE ON {table}"
            f" REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
            f" EXECUTE FUNCTION erstwhile_{table[:-1]}_drops()"
        )


#: The tables whose rows every write adds beside a record, without a foreign key to it
#: since m010: a hard delete removes their rows itself (PostgresDialect.forget_record).
UNCHAINED = ("record_tags", "record_meta", "vectors")


@migration
def m010_write_rows_without_foreign_keys(conn: Connection) -> None:
    """The rows a write adds beside each record (its tag and metadata rows, its
    vectors) lose their foreign keys to ``records``. A foreign key is checked row by
    row at the end of each statement (a query per row, and a share lock on the
    record): with two of them a 1,000-record batch spent about 20 % of its server
    CPU checking records it had created itself (docs/postgres.md, Ingest). Nothing
    writes such a row without the record locked or created in the same transaction
    (``FOR UPDATE`` when a write reads it, ``FOR SHARE`` for the embed job's vectors),
    so no row can point at a record a concurrent delete removes; the ``ON DELETE
    CASCADE`` is now the hard delete's own statement, and ``integrity()`` counts
    rows of no record. Their indexes by record stay (the delete and the scope copy
    read them)."""
    for table in UNCHAINED:  # names from this code, not input
        rows = conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s)"
            " AND contype = 'f' AND confrelid = to_regclass('records')",
            (table,),
        ).fetchall()
        for (name,) in rows:
            conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'.encode())


@migration
def m011_lexical_documents(conn: Connection) -> None:
    """Each record's terms as one row of ``lexical_docs`` (as on SQLite:
    :mod:`erstwhile.store.sql.lexical`), by which a record's postings are found when its
    content is replaced or it is removed, so ``lexical_postings`` loses its index by
    record: a second B-tree entry for each of a batch's ~7,500 postings, where a
    document is one row per record, appended in rowid order. Filled here from the
    postings (terms in byte order, each as often as its count: ``lexical.packed``)."""
    run_script(
        conn,
        """
        CREATE TABLE lexical_docs (
            namespace  text COLLATE "C" NOT NULL,
            record     bigint NOT NULL,
            terms      text NOT NULL,
            length     integer NOT NULL,
            PRIMARY KEY (namespace, record)
        );
        INSERT INTO lexical_docs (namespace, record, terms, length)
        SELECT p.namespace, p.record, string_agg(p.term, ' ' ORDER BY p.term), max(p.length)
        FROM lexical_postings p CROSS JOIN LATERAL generate_series(1, p.tf)
        GROUP BY p.namespace, p.record;
        DROP INDEX lexical_postings_record;
        """,
    )


@migration
def m012_term_counts_fillfactor(conn: Connection) -> None:
    """``lexical_terms`` pages keep half their space free, so the batch's update of
    each of its terms' counts (``PostgresDialect.add_term_counts``) lands on the page
    of the row it replaces: a heap-only update, with no new entry in the primary key
    and the old version pruned when the page is next filled. Full pages made most of
    them new index entries and the table and its key grew with every batch (at 20k
    records, 2,000 terms: 29,000 updates, 8,000 of them heap-only, 156 pages; the
    update of a 1,000-record batch's 1,950 terms 7.5 ms of server CPU against 3.8 ms,
    docs/postgres.md). Pages already written fill to the new bound as rows move."""
    conn.execute("ALTER TABLE lexical_terms SET (fillfactor = 50)")


@migration
def m013_versions_from_the_past(conn: Connection) -> None:
    """A record's versions are its row and its past (:func:`past.drop_versions`)."""
    past.drop_versions(conn)


@migration
def m014_job_usage(conn: Connection) -> None:
    """An extract job's provider figures (``usage``, JSON: calls, retries, failures,
    unreadable answers, tokens, time; :mod:`erstwhile.extraction.usage`) and why a job
    that ended ``done`` stopped before its backlog was empty (``stopped``: its budget)."""
    conn.execute("ALTER TABLE jobs ADD COLUMN usage text")
    conn.execute("ALTER TABLE jobs ADD COLUMN stopped text")


#: pgvector's version and schema, if the database has it.
_VECTOR = (
    "SELECT e.extversion, n.nspname FROM pg_extension e"
    " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)


def _ensure_vector_extension(conn: Connection) -> None:
    """pgvector, 0.8 or later, where this store's search path finds it. A database
    without it gets it in the first schema of the path after the store's own (public,
    as ``with_schema`` and docs/postgres.md write the path), where every store of the
    database finds it, rather than in the store's own schema (where CREATE EXTENSION
    puts it by default), which the stores of other schemas never search."""
    row = conn.execute(_VECTOR).fetchone()
    if row is None:
        path = conn.execute("SELECT current_schemas(false), current_schema()").fetchone()
        schemas, own = (list(path[0]), path[1]) if path else ([], None)
        after = schemas[schemas.index(own) + 1 :] if own in schemas else []
        shared = after[0] if after else own
        if shared is None:
            raise InvalidInput(
                "storage url: its search path names no schema that exists; create the "
                "schema, or name one (options=-csearch_path=SCHEMA,public)"
            )
        try:
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS vector SCHEMA {_quoted(shared)}".encode())
        except errors.InsufficientPrivilege:
            raise InvalidInput(
                "storage url: the pgvector extension is not installed in this database and "
                "this role may not install it; run CREATE EXTENSION vector as a superuser"
            ) from None
        except errors.FeatureNotSupported as error:
            raise InvalidInput(f"storage url: pgvector is not available: {error}") from None
        row = conn.execute(_VECTOR).fetchone()
    version = tuple(int(part) for part in str(row[0] if row else "0").split(".")[:2])
    if version < (0, 8):
        raise InvalidInput(
            f"storage url: pgvector {row[0] if row else '?'} is too old; erstwhile needs 0.8 "
            "or later (iterative index scans); run ALTER EXTENSION vector UPDATE"
        )
    assert row is not None
    visible = conn.execute("SELECT %s = ANY (current_schemas(false))", (row[1],)).fetchone()
    if not visible or not visible[0]:
        raise InvalidInput(
            f"storage url: pgvector is installed in schema {row[1]!r}, which this store's "
            "search path does not include; put that schema on the path after the store's "
            f"own (options=-csearch_path=SCHEMA,{row[1]}), or move pgvector where every "
            "store finds it: ALTER EXTENSION vector SET SCHEMA public"
        )


def _quoted(name: str) -> str:
    """A schema's name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def pending(conn: Connection) -> bool:
    """Whether any migration is missing (a cheap check without a lock)."""
    # In this store's own schema: through the search path, a store in `public` would
    # pass for this one, and every statement would then reach public's tables. (No
    # parameters: the text is sent as written, so '%I' is format()'s own.)
    row = conn.execute(
        "SELECT to_regclass(format('%I.schema_migrations', current_schema())) IS NOT NULL"
    ).fetchone()
    if not row or not row[0]:
        return True
    done = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
    return int(done[0] if done else 0) < len(MIGRATIONS)


def apply_migrations(conn: Connection, now: int, *, on_citus: bool = False) -> list[str]:
    """Applies what is missing in one transaction, and on Citus places the tables
    not placed yet (:func:`citus.distribute`). Returns the names applied."""
    if not pending(conn) and not (on_citus and citus.unplaced(conn)):
        return []
    applied: list[str] = []
    with conn.transaction():
        # one migrator per schema at a time; the lock ends with the transaction
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
            (_LOCK,),
        )
        _ensure_vector_extension(conn)
        if on_citus:  # a migration of stored rows reads every namespace's
            conn.execute("SET LOCAL citus.multi_task_query_log_level = off")
        applied = migrate.apply(conn, MIGRATIONS, now, nullcontext)
        if on_citus:
            citus.distribute(conn)
    return applied

"""The SQL store: the Store protocol once, for SQLite and PostgreSQL alike.

Everything here is the same on both engines — the writes and their rules, reads,
history, expiry, jobs, tokens, the ledger — and is written with ``?`` placeholders.
What differs (connections and locking, the lexical and vector lanes, DDL, error
translation) is the dialect's (:mod:`erstwhile.store.sql.dialect`). Both give the
same records, versions, ledger entries, errors, orderings and ties, so one
conformance suite runs on both; scores differ in scale only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from erstwhile.domain.auth import Capability, Token
from erstwhile.domain.errors import NotFound
from erstwhile.domain.ledger import CHANGE_OPS, Change, ChangesPage, LedgerEntry, change_kind
from erstwhile.domain.records import Record
from erstwhile.domain.search import ExpireAction, ExpireRequest, SearchRequest
from erstwhile.domain.sequences import Place
from erstwhile.domain.time import Window, format_instant, from_us
from erstwhile.gc_pause import gc_paused
from erstwhile.store.sql import expiry, lexical, lexical_index, sequences
from erstwhile.store.sql.dialect import Database, Dialect, Lane, Tx
from erstwhile.store.sql.graph import Graph
from erstwhile.store.sql.maintenance import Finding, Read
from erstwhile.store.sql.past import known_rows, stored_versions, version_numbers, version_row
from erstwhile.store.sql.rows import COLUMNS, record_from_row
from erstwhile.store.sql.scope import metadata_clause
from erstwhile.store.sql.writes import Writes, fetch, missing

HISTORY_LIMIT = 1000

JOB_FIELDS = (
    "id", "type", "namespace", "state", "done", "error", "created_at", "updated_at", "owner",
    "usage", "stopped",
)  # fmt: skip
_TOKEN_FIELDS = "id, name, digest, capabilities, namespaces, disabled, created_at"


def jobs_query(
    namespace: str | None = None,
    *,
    state: str | None = None,
    job_id: int | None = None,
    last: int | None = None,
) -> tuple[str, list[Any]]:
    """The SELECT of job rows (JOB_FIELDS, oldest first) that match every filter given,
    only the ``last`` ones if asked."""
    where = []
    params: list[Any] = []
    for column, value in (("namespace", namespace), ("state", state), ("id", job_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {', '.join(JOB_FIELDS)} FROM jobs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if last is not None:
        sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT ?) latest"
        params.append(last)
    return sql + " ORDER BY id", params


def _token(row: Sequence[Any]) -> Token:
    return Token(
        id=row[0],
        name=row[1],
        digest=row[2],
        capabilities=frozenset(Capability(c) for c in json.loads(row[3])),
        namespaces=frozenset(json.loads(row[4])),
        disabled=bool(row[5]),
        created_at=row[6],
    )


class SqlStore:
    """Implements the Store protocol on one SQL database, through its ``dialect``."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.backend = dialect.name
        self.request_threads = dialect.request_threads
        self.graph = Graph(dialect)

    @property
    def db(self) -> Database:
        """The dialect's connections (tests and diagnostics reach the engine here)."""
        return self.dialect.db

    def close(self) -> None:
        self.dialect.close()

    def _write(self, namespace: str, now: int, actor: str, work: Any) -> Any:
        """Runs ``work(writes)`` in one write transaction of ``namespace``."""

        def run(tx: Tx) -> Any:
            writes = Writes(self.dialect, tx, namespace, now=now, actor=actor)
            result = work(writes)
            writes.flush()
            return result

        return self.db.write(run)

    # -- writes ---------------------------------------------------------------

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
        def work(w: Writes) -> list[tuple[str, int]]:
            written = w.upsert(records, embedder_id, units)
            for record_id, at in invalidations:
                w.invalidate(record_id, at)
            return written

        with gc_paused():  # a batch of short-lived objects, none cyclic
            written: list[tuple[str, int]] = self._write(namespace, now, actor, work)
        self.dialect.wrote(len(records))
        return written

    def invalidate(self, namespace: str, record_id: str, at: int, *, now: int, actor: str) -> int:
        return int(self._write(namespace, now, actor, lambda w: w.invalidate(record_id, at)))

    def delete(self, namespace: str, record_id: str, *, hard: bool, now: int, actor: str) -> None:
        if not hard:
            self._write(namespace, now, actor, lambda w: w.soft_delete(record_id))
            return

        self._write(namespace, now, actor, lambda w: w.hard_delete(record_id))
        self.dialect.scrub()

    def verify(self, namespace: str, record_id: str, reviewer: str, *, now: int, actor: str) -> int:
        return int(self._write(namespace, now, actor, lambda w: w.verify(record_id, reviewer)))

    def expire(self, namespace: str, request: ExpireRequest, *, now: int, actor: str) -> int:
        """Applies the action to at most ``max_rows`` matching records, oldest first."""
        d = self.dialect
        clauses, params = metadata_clause(
            d, "r", namespace, request.filter, request.predicates, request.tags
        )
        action_terms, action_params = expiry.candidates(request, now)
        where = ["r.namespace = ?", *clauses, *action_terms]
        params = [namespace, *params, *action_params, request.max_rows]
        sql = (
            f"SELECT r.id FROM records r WHERE {' AND '.join(where)}"
            f" ORDER BY r.rowid LIMIT ?{d.lock_for_update}"
        )

        hard = request.action == ExpireAction.HARD_DELETE

        def work(writes: Writes) -> int:
            ids = [row[0] for row in writes.tx.execute(sql, params).fetchall()]
            return expiry.apply(writes, ids, request.action)

        affected = int(self._write(namespace, now, actor, work))
        if hard and affected:
            self.dialect.scrub()
        return affected

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
        self._write(
            namespace, now, actor, lambda w: w.set_embedding(record_id, embedder_id, vector)
        )

    # -- reads ----------------------------------------------------------------

    def get(
        self,
        namespace: str,
        record_id: str,
        version: int | None = None,
        known_at: int | None = None,
    ) -> Record:
        if known_at is not None:
            with self.db.snapshot() as tx:
                known = self._known(tx, namespace, record_id, known_at)
            if known is None:
                raise NotFound(
                    f"record {record_id!r} was not known in namespace {namespace!r} at "
                    f"{format_instant(known_at)} (not recorded yet, or hard-deleted since)"
                )
            return known
        with self.db.read() as tx:
            if version is None:
                found = fetch(self.dialect, tx, namespace, record_id)
                if found is None:
                    raise missing(record_id, namespace)
                return found[1]
            row = version_row(self.dialect, tx, namespace, record_id, version)
        if row is None:
            raise NotFound(
                f"record {record_id!r} has no version {version} in namespace {namespace!r}"
            )
        return record_from_row(row)

    def versions(self, namespace: str, record_id: str) -> list[int]:
        with self.db.read() as tx:
            return version_numbers(tx, namespace, record_id)

    def _known(self, tx: Tx, namespace: str, record_id: str, known_at: int) -> Record | None:
        """The version of the record known at ``known_at`` (with ``known_until`` when a
        later version replaced it), or None."""
        rows = known_rows(self.dialect, tx, namespace, known_at, [record_id], by="id")
        if not rows:
            return None
        row = rows[0]
        record = record_from_row(row)
        if row[-1] is not None:
            record.known_until = from_us(row[-1])
        return record

    def history(
        self,
        namespace: str,
        record_id: str,
        known_at: int | None = None,
        *,
        versions: bool = False,
    ) -> list[Record]:
        """Every record of the chain through ``record_id``, oldest first (each as known
        at ``known_at``, when given). The walk remembers where it has been and stops at
        missing links. With ``versions``, every stored version of each record of the
        chain instead (recorded by ``known_at``, when given), in record-time order."""

        def read(tx: Tx, link: str) -> Record | None:
            if known_at is not None:
                return self._known(tx, namespace, link, known_at)
            found = fetch(self.dialect, tx, namespace, link)
            return found[1] if found else None

        with self.db.snapshot() as tx:
            first = read(tx, record_id)
            if first is None:
                if known_at is not None:
                    self.get(namespace, record_id, known_at=known_at)  # says why
                raise missing(record_id, namespace)
            chain: dict[str, Record] = {record_id: first}
            frontier = [first]
            while frontier and len(chain) < HISTORY_LIMIT:
                record = frontier.pop()
                links = list(record.supersedes)
                if record.superseded_by:
                    links.append(record.superseded_by)
                for link in links:
                    if link in chain:
                        continue
                    linked = read(tx, link)
                    if linked is not None:
                        chain[link] = linked
                        frontier.append(linked)
            records = sorted(
                chain.values(), key=lambda r: (r.valid_from, r.created_at, r.version, r.id)
            )
            if not versions:
                return records
            rows = stored_versions(self.dialect, tx, namespace, list(chain), known_at)
        place = {record.id: n for n, record in enumerate(records)}
        every = []
        for row in rows:
            version = record_from_row(row)
            if row[-1] is not None:
                version.known_until = from_us(row[-1])
            every.append(version)
        # record time first; versions written together keep the chain's order
        return sorted(every, key=lambda r: (r.updated_at, place[r.id], r.version))

    def changes(
        self, namespace: str, since: int, until: int, *, after: int | None, limit: int
    ) -> ChangesPage:
        """The ledger's changes of records recorded in ``[since, until)``, oldest first,
        ``limit`` at a time after ledger ``seq`` ``after``; each with the version it
        wrote, read from the versions (absent after a hard delete)."""
        ops, op_params = self.dialect.in_list("op", list(CHANGE_OPS))
        with self.db.snapshot() as tx:
            rows = tx.execute(
                "SELECT seq, at, op, record_id, version, actor FROM ledger WHERE namespace = ?"
                f" AND at >= ? AND at < ? AND seq > ? AND {ops} ORDER BY seq LIMIT ?",
                [namespace, since, until, after or 0, *op_params, limit + 1],
            ).fetchall()
            page = rows[:limit]
            bodies: dict[tuple[str, int], Record] = {}
            for record_id, version in {(r[3], r[4]) for r in page if r[4] is not None}:
                found = version_row(self.dialect, tx, namespace, record_id, version)
                if found is not None:
                    bodies[(record_id, version)] = record_from_row(found, with_payload=False)
        changes = []
        for seq, at, op, record_id, version, actor in page:
            kind = change_kind(op, version)
            assert kind is not None
            changes.append(Change(seq, at, kind, op, record_id, version, actor,
                                  bodies.get((record_id, version))))  # fmt: skip
        return ChangesPage(changes, page[-1][0] if len(rows) > limit else None)

    def origin_records(self, namespace: str, source: str) -> list[Record]:
        """Every record (in every state but hard-deleted) whose ``origin.source`` is
        ``source``, in the order they were first written."""
        source_of = self.dialect.json_text("origin", "source")
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {COLUMNS} FROM records WHERE namespace = ? AND origin IS NOT NULL"
                f" AND {source_of} = ? ORDER BY rowid",
                (namespace, source),
            ).fetchall()
        return [record_from_row(row, with_payload=False) for row in rows]

    def lexical(
        self, namespace: str, request: SearchRequest, window: Window | None, limit: int
    ) -> list[tuple[Record, float]]:
        """BM25 within the scope (:mod:`erstwhile.store.sql.lexical`); higher scores
        are better, ties by id."""
        return lexical.search(
            self.dialect, Lane(namespace, request, window, limit, request.known_at_us())
        )

    def text_search(self, namespace: str) -> str:
        """The text-search language the namespace's records are indexed in."""
        with self.db.read() as tx:
            return lexical.language(tx, namespace)

    def set_text_search(self, namespace: str, language: str) -> bool:
        """Binds the namespace to a text-search language, re-indexing its records (in
        one transaction) if they were indexed in another. Returns whether it changed."""
        with self.db.read() as tx:
            if lexical.bound_language(tx, namespace) == language:
                return False  # the common case: no write at all
        return bool(
            self.db.write(
                lambda tx: lexical_index.set_language(self.dialect, tx, namespace, language)
            )
        )

    def semantic(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        embedder_id: str,
        query: np.ndarray,
        limit: int,
    ) -> tuple[list[tuple[Record, float]], int]:
        """Cosine over the in-scope records that have a vector for ``embedder_id``.

        Returns the best ``limit`` hits (ties by id) and how many in-scope records had
        no vector yet (``unembedded``)."""
        lane = Lane(namespace, request, window, limit, request.known_at_us())
        return self.dialect.semantic(lane, embedder_id, query)

    def build_vector_index(self, dimensions: int) -> None:
        """Builds the vector index of one dimension now, where the dialect keeps one (a
        search builds it when it first needs it; after a bulk load an operator may
        build it ahead)."""
        self.dialect.build_vector_index(dimensions)

    # -- derived vectors ----------------------------------------------------------

    def vectors_for(
        self, namespace: str, ids: Sequence[str], embedder_id: str
    ) -> dict[str, list[float]]:
        if not ids:
            return {}
        return self.dialect.vectors_for(namespace, ids, embedder_id)

    def backlog(self, namespace: str, embedder_id: str, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` records with no vector for ``embedder_id``: (rowid, hash, content)."""
        has_vector = self.dialect.has_vector("v", "r")
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT r.rowid, r.content_hash, r.content FROM records r WHERE r.namespace = ?"
                f" AND NOT EXISTS (SELECT 1 FROM vectors v WHERE {has_vector})"
                " ORDER BY r.rowid LIMIT ?",
                (namespace, embedder_id, limit),
            ).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def backlog_count(self, namespace: str, embedder_id: str) -> int:
        with self.db.read() as tx:
            row = tx.execute(
                "SELECT count(*) FROM records r WHERE r.namespace = ? AND NOT EXISTS"
                f" (SELECT 1 FROM vectors v WHERE {self.dialect.has_vector('v', 'r')})",
                (namespace, embedder_id),
            ).fetchone()
        return int(row[0]) if row else 0

    def store_vectors(
        self, namespace: str, embedder_id: str, items: Sequence[tuple[int, str, np.ndarray]]
    ) -> int:
        """Stores derived vectors for the namespace's (rowid, content_hash) pairs whose
        content is still that hash — a record rewritten meanwhile is left for the next
        pass. Touches no record. Returns how many were stored."""
        if not items:
            return 0
        d = self.dialect
        test, params = d.in_list("rowid", [rowid for rowid, _, _ in items])

        def work(tx: Tx) -> int:
            current = {
                row[0]: row[1]
                for row in tx.execute(
                    f"SELECT rowid, content_hash FROM records WHERE namespace = ? AND {test}"
                    + d.lock_for_share,
                    [namespace, *params],
                ).fetchall()
            }
            writes = Writes(d, tx, namespace, now=0, actor="")
            stored = []
            for rowid, content_hash, vector in items:
                if current.get(rowid) == content_hash:
                    writes.store_vector(rowid, embedder_id, vector)
                    stored.append(rowid)
            d.vectors_alone(tx, stored)
            return len(stored)

        stored = self.db.write(work)
        d.wrote(stored)
        return stored

    def places(self, namespace: str, rowids: Sequence[int]) -> dict[int, Place]:
        with self.db.read() as tx:
            return sequences.places(self.dialect, tx, namespace, rowids)

    def before(self, namespace: str, place: Place) -> tuple[int, str] | None:
        with self.db.read() as tx:
            return sequences.before(self.dialect, tx, namespace, place)

    def clear_vectors(self, namespace: str, embedder_id: str) -> int:
        """Drops a namespace's vectors for ``embedder_id`` (reindex makes them a backlog)."""
        return self.db.write(
            lambda tx: self.dialect.withdraw_vectors(tx, namespace, embedder_id=embedder_id)
        )

    # -- jobs ---------------------------------------------------------------------

    def job_start(self, job_type: str, namespace: str, now: int, owner: str) -> int:
        def work(tx: Tx) -> int:
            row = tx.execute(
                "INSERT INTO jobs (type, namespace, state, created_at, updated_at, owner)"
                " VALUES (?, ?, 'running', ?, ?, ?) RETURNING id",
                (job_type, namespace, now, now, owner),
            ).fetchall()
            return int(row[0][0])

        return self.db.write(work)

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
        figures = None if usage is None else json.dumps(usage, sort_keys=True)
        self.db.write(
            lambda tx: tx.execute(
                "UPDATE jobs SET state = ?, done = ?, error = ?, updated_at = ?,"
                " usage = COALESCE(?, usage), stopped = COALESCE(?, stopped) WHERE id = ?",
                (state, done, error, now, figures, stopped, job_id),
            )
        )

    def jobs(
        self,
        namespace: str | None = None,
        *,
        state: str | None = None,
        job_id: int | None = None,
        last: int | None = None,
    ) -> list[dict[str, Any]]:
        sql, params = jobs_query(namespace, state=state, job_id=job_id, last=last)
        with self.db.read() as tx:
            rows = tx.execute(sql, params).fetchall()
        jobs = [dict(zip(JOB_FIELDS, row, strict=True)) for row in rows]
        for job in jobs:
            if job["usage"] is not None:
                job["usage"] = json.loads(job["usage"])
        return jobs

    # -- tokens -------------------------------------------------------------------

    def token_create(self, token: Token) -> None:
        self.db.write(
            lambda tx: tx.execute(
                f"INSERT INTO tokens ({_TOKEN_FIELDS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    token.id,
                    token.name,
                    token.digest,
                    json.dumps(sorted(c.value for c in token.capabilities)),
                    json.dumps(sorted(token.namespaces)),
                    token.disabled,
                    token.created_at,
                ),
            )
        )

    def tokens(self) -> list[Token]:
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {_TOKEN_FIELDS} FROM tokens ORDER BY created_at, id"
            ).fetchall()
        return [_token(row) for row in rows]

    def token_by_digest(self, token_digest: str) -> Token | None:
        with self.db.read() as tx:
            row = tx.execute(
                f"SELECT {_TOKEN_FIELDS} FROM tokens WHERE digest = ?", (token_digest,)
            ).fetchone()
        return _token(row) if row else None

    def token_disable(self, token_id: str) -> bool:
        return self.db.write(
            lambda tx: (
                tx.execute("UPDATE tokens SET disabled = ? WHERE id = ?", (True, token_id)).rowcount
                > 0
            )
        )

    # -- maintenance (backup, export, import, check) ---------------------------

    @contextmanager
    def reader(self) -> Iterator[Read]:
        """Reads (``?`` placeholders) that all see one committed state."""
        with self.db.snapshot() as tx:
            self.dialect.every_shard(tx)  # a backup, an export, a check: every namespace
            yield lambda sql, params: tx.execute(sql, list(params)).fetchall()

    def restore(
        self,
        records: Sequence[Sequence[Record]],
        *,
        now: int,
        actor: str,
        hard_deleted: Sequence[tuple[str, str]] = (),
    ) -> None:
        d = self.dialect

        def work(tx: Tx) -> None:
            writes: dict[str, Writes] = {}

            def of(namespace: str) -> Writes:
                if namespace not in writes:
                    writes[namespace] = Writes(d, tx, namespace, now=now, actor=actor)
                return writes[namespace]

            for versions in records:
                of(versions[0].namespace).restore(versions)
            for namespace, record_id in hard_deleted:
                of(namespace).restore_hard_delete(record_id)
            for namespace in sorted(writes):
                writes[namespace].flush()

        self.db.write(work)
        d.wrote(sum(len(versions) for versions in records))

    def backup(self, path: str) -> None:
        self.dialect.backup(path)

    def integrity(self) -> list[Finding]:
        with self.db.snapshot() as tx:
            self.dialect.every_shard(tx)
            text = lexical_index.integrity(
                lambda sql: tx.execute(sql).fetchall(),
                lexical_index.tiers(self.dialect),
                documents=lexical.documented(self.dialect),
                segments=self.dialect.lexical_segments,
            )
        return [*self.dialect.integrity(), text]

    # -- inspection -------------------------------------------------------------

    def ledger(
        self, namespace: str | None = None, record_id: str | None = None
    ) -> list[LedgerEntry]:
        sql = "SELECT seq, at, op, namespace, record_id, version, actor, detail FROM ledger"
        given = (("namespace", namespace), ("record_id", record_id))
        terms = [(column, value) for column, value in given if value is not None]
        if terms:
            sql += " WHERE " + " AND ".join(f"{column} = ?" for column, _ in terms)
        with self.db.read() if namespace is not None else self.db.snapshot() as tx:
            if namespace is None:
                self.dialect.every_shard(tx)
            rows = tx.execute(sql + " ORDER BY seq", [value for _, value in terms]).fetchall()
        return [LedgerEntry(*row) for row in rows]

    def record_counts(self, namespace: str, now: int) -> dict[str, int]:
        # one state per record, so the parts add up to `records`: a tombstone is deleted;
        # a live record is closed (valid_to <= now: superseded or invalidated), or open
        # at now and then current or, when valid_from is after now, future
        live = "deleted_at IS NULL"
        closed = f"{live} AND valid_to IS NOT NULL AND valid_to <= ?"
        still = f"{live} AND (valid_to IS NULL OR valid_to > ?)"
        with self.db.read() as tx:
            row = tx.execute(
                "SELECT count(*),"
                f" count(CASE WHEN {still} AND valid_from <= ? THEN 1 END),"
                f" count(CASE WHEN {still} AND valid_from > ? THEN 1 END),"
                f" count(CASE WHEN {closed} AND superseded_by IS NOT NULL THEN 1 END),"
                f" count(CASE WHEN {closed} AND superseded_by IS NULL THEN 1 END),"
                " count(CASE WHEN deleted_at IS NOT NULL THEN 1 END)"
                " FROM records WHERE namespace = ?",
                (now, now, now, now, now, now, namespace),
            ).fetchone()
        names = ("records", "current", "future", "superseded", "invalidated", "deleted")
        return dict(zip(names, (int(value) for value in row), strict=True))

    def namespaces(self) -> list[str]:
        with self.db.read() as tx:
            rows = tx.execute("SELECT name FROM namespaces ORDER BY name").fetchall()
        return [row[0] for row in rows]

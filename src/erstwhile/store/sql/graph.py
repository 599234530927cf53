"""The knowledge graph in SQL, written once for every backend.

Entities, mentions, ``relates_to`` edges (table ``relations``), ``possibly_same_as``
links and extraction markers live beside the records they are derived from, in the
same database and the same transactions. Everything here is written once, with
``?`` placeholders, over the shared SQL store's dialect (:mod:`erstwhile.store.sql`):
its connections, and the one scope and temporal clause (``store/sql/scope.py``). Only
the DDL is per backend (``store/*/migrations.py``).

Expansion (SPEC §6) walks hit → mentions → entity → relates_to → entity ← mentions ←
record in one statement per hop, with the search's scope on the records it reaches
and the search's time on the edges it crosses, so nothing out of scope or out of time
is ever read into Python.

Record time (``known_at``, SPEC §3): a mention and an edge carry ``known_from``, the
instant they were recorded. A mention a re-extraction retracts moves to
``past_mentions`` and an edge whose validity a retraction or a sweep closes leaves
its replaced version in ``past_relations``, each with its record-time range
``[known_from, known_to)``; so expansion as known at T walks the mentions and edge
versions known then, to the record versions known then. A hard delete takes the
record's past graph rows too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from erstwhile.domain.errors import NotFound
from erstwhile.domain.graph import (
    Entity,
    GraphRows,
    GraphWrite,
    Marker,
    Mention,
    RecordedEdge,
    RecordedEntity,
    RecordedMention,
    Relationship,
)
from erstwhile.domain.records import Record
from erstwhile.domain.search import SearchRequest
from erstwhile.domain.time import Window
from erstwhile.domain.validation import quoted
from erstwhile.store.sql.dialect import Dialect
from erstwhile.store.sql.rows import prefixed, record_from_row
from erstwhile.store.sql.scope import known_scope, scope_clause, temporal_clause

T = TypeVar("T")
Conn = Any  # a DB-API connection of either driver: both have execute() -> cursor

#: Paths kept per appended record (its ``via``): enough to explain it, never a flood.
MAX_PATHS = 5
#: Kinds a record has to be (or an origin it has to carry) for extraction to read it.
EXTRACTED_KIND = "note"


@dataclass(frozen=True)
class Pending:
    """A record the extract job has to read."""

    rowid: int
    id: str
    content: str
    content_hash: str
    valid_from: int
    origin: dict[str, Any] | None
    stale: bool  # read before, with other content: its old facts are retracted


@dataclass(frozen=True)
class Reached:
    """A record expansion appended: how many hops out, from which record, by which paths."""

    record: Record
    hops: int
    origin: str
    via: list[dict[str, str]]


def _run(conn: Conn, sql: str, params: Sequence[Any]) -> list[Any]:
    """Runs one statement; its rows if it is a query (a write returns none). Decided
    by the text, not the cursor: in a pipeline a cursor knows nothing until a sync."""
    cursor = conn.execute(sql, list(params))
    return list(cursor.fetchall()) if sql.lstrip().upper().startswith("SELECT") else []


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _entity(row: Sequence[Any]) -> Entity:
    return Entity(row[0], row[1], row[2], tuple(json.loads(row[3])))


def _edge(row: Sequence[Any]) -> Relationship:
    return Relationship(
        id=row[0], subject=row[1], predicate=row[2], object=row[3], valid_from=row[4],
        valid_to=row[5], confidence=float(row[6]),
        provenance=json.loads(row[7]) if row[7] else None,
    )  # fmt: skip


_EDGE_COLUMNS = "id, subject, predicate, object, valid_from, valid_to, confidence, provenance"
_MENTION_COLUMNS = "namespace, record, entity, spelling, provenance"
#: Where an entity can still be in use, each (table, column) with an index of its own.
_ENTITY_USES = (
    ("mentions", "entity"), ("past_mentions", "entity"),
    ("relations", "subject"), ("relations", "object"),
    ("past_relations", "subject"), ("past_relations", "object"),
)  # fmt: skip
# the record an open extracted fact cites, once that record has stopped being current
_ENDED = (
    "FROM records r WHERE r.namespace = relations.namespace AND r.id = relations.record"
    " AND r.valid_to IS NOT NULL"
)
_UNSWEPT = (
    "WHERE namespace = ? AND record IS NOT NULL AND valid_to IS NULL"
    f" AND EXISTS (SELECT 1 {_ENDED})"
)


class Graph:
    """The graph operations of one store, over its dialect's connections."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def _read(self) -> AbstractContextManager[Conn]:
        return self.d.db.snapshot()

    def _write(self, work: Callable[[Conn], T]) -> T:
        return self.d.db.write(work)

    def _rows(self, conn: Conn, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return _run(conn, sql, params)

    # -- reads ------------------------------------------------------------------

    def known(self, namespace: str) -> list[Entity]:
        """Every entity of the namespace, for resolution."""
        with self._read() as conn:
            rows = self._rows(
                conn,
                "SELECT id, name, kind, aliases FROM entities WHERE namespace = ? ORDER BY id",
                [namespace],
            )
        return [_entity(row) for row in rows]

    def entities(
        self, namespace: str, *, q: str | None = None, kind: str | None = None, limit: int = 100
    ) -> list[Entity]:
        """Entities by name (``q``: a case-insensitive part of the name or an alias)."""
        where, params = ["namespace = ?"], [namespace]
        if q:
            pattern = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace(
                "_", "\\_"
            ) + "%"  # fmt: skip
            where.append("(lower(name) LIKE ? ESCAPE '\\' OR lower(aliases) LIKE ? ESCAPE '\\')")
            params += [pattern, pattern]
        if kind:
            where.append("kind = ?")
            params.append(kind)
        with self._read() as conn:
            rows = self._rows(
                conn,
                f"SELECT id, name, kind, aliases FROM entities WHERE {' AND '.join(where)}"
                " ORDER BY name, id LIMIT ?",
                [*params, limit],
            )
        return [_entity(row) for row in rows]

    def entity(self, namespace: str, entity_id: str) -> Entity:
        with self._read() as conn:
            rows = self._rows(
                conn,
                "SELECT id, name, kind, aliases FROM entities WHERE namespace = ? AND id = ?",
                [namespace, entity_id],
            )
        if not rows:
            raise NotFound(f"entity {quoted(entity_id)} does not exist in namespace {namespace!r}")
        return _entity(rows[0])

    def same_as(self, namespace: str, entity_id: str) -> list[str]:
        """The entities ``entity_id`` is possibly the same as."""
        with self._read() as conn:
            rows = self._rows(
                conn,
                "SELECT b FROM possibly_same_as WHERE namespace = ? AND a = ?"
                " UNION SELECT a FROM possibly_same_as WHERE namespace = ? AND b = ?",
                [namespace, entity_id, namespace, entity_id],
            )
        return sorted(row[0] for row in rows)

    def relationships(
        self, namespace: str, entity_id: str | None, window: Window | None
    ) -> list[Relationship]:
        """Edges from or to ``entity_id`` (every edge when None) valid in ``window``
        (``None``: every edge, retracted ones too), oldest first."""
        temporal, temporal_params = temporal_clause(self.d, "e", window, tombstones=False)
        where = ["e.namespace = ?", temporal]
        params: list[Any] = [namespace, *temporal_params]
        if entity_id is not None:
            where.insert(1, "(e.subject = ? OR e.object = ?)")
            params[1:1] = [entity_id, entity_id]
        with self._read() as conn:
            rows = self._rows(
                conn,
                f"SELECT {_EDGE_COLUMNS} FROM relations e WHERE {' AND '.join(where)}"
                " ORDER BY e.valid_from, e.id",
                params,
            )
        return [_edge(row) for row in rows]

    def mentions(self, namespace: str, entity_id: str | None = None) -> list[Mention]:
        """Records mentioning ``entity_id`` (every mention when None), by record id."""
        where, params = "m.namespace = ?", [namespace]
        if entity_id is not None:
            where += " AND m.entity = ?"
            params.append(entity_id)
        with self._read() as conn:
            rows = self._rows(
                conn,
                "SELECT r.id, m.entity, m.spelling, m.provenance FROM mentions m"
                " JOIN records r ON r.namespace = m.namespace AND r.rowid = m.record"
                f" WHERE {where} ORDER BY r.id, m.entity",
                params,
            )
        return [Mention(row[0], row[1], row[2], json.loads(row[3]) if row[3] else None)
                for row in rows]  # fmt: skip

    # -- the extract job's cursor ---------------------------------------------------

    def _backlog_where(self, namespace: str, now: int) -> tuple[str, list[Any]]:
        temporal, temporal_params = temporal_clause(self.d, "r", Window.point(now))
        return (
            "FROM records r LEFT JOIN extraction_markers x"
            " ON x.namespace = r.namespace AND x.record = r.rowid"
            " WHERE r.namespace = ? AND (r.kind = ? OR r.origin IS NOT NULL)"
            f" AND {temporal}"
            " AND (x.content_hash IS NULL OR x.content_hash <> r.content_hash)",
            [namespace, EXTRACTED_KIND, *temporal_params],
        )

    def backlog(self, namespace: str, now: int, limit: int) -> list[Pending]:
        """Up to ``limit`` current records to extract (a note or mined, and not read
        with this content yet), oldest first."""
        where, params = self._backlog_where(namespace, now)
        with self._read() as conn:
            rows = self._rows(
                conn,
                "SELECT r.rowid, r.id, r.content, r.content_hash, r.valid_from, r.origin,"
                f" x.record {where} ORDER BY r.rowid LIMIT ?",
                [*params, limit],
            )
        return [
            Pending(row[0], row[1], row[2], row[3], row[4],
                    json.loads(row[5]) if row[5] else None, row[6] is not None)
            for row in rows
        ]  # fmt: skip

    def backlog_count(self, namespace: str, now: int) -> int:
        where, params = self._backlog_where(namespace, now)
        with self._read() as conn:
            return int(self._rows(conn, f"SELECT count(*) {where}", params)[0][0])

    # -- writes -------------------------------------------------------------------

    def apply(
        self,
        namespace: str,
        change: GraphWrite,
        *,
        now: int,
        extracted: tuple[Pending, str] | None = None,
    ) -> bool:
        """Writes ``change`` in one transaction. With ``extracted`` (the record read
        and the extractor), only if the record still has the content that was read,
        retracting what its earlier content said, and ending with its marker.
        Returns False when the record changed meanwhile (the next pass reads it)."""

        def work(conn: Conn) -> bool:
            if extracted is not None:
                pending, extractor = extracted
                if not self._rows(
                    conn,
                    "SELECT 1 FROM records WHERE namespace = ? AND rowid = ? AND content_hash = ?",
                    [namespace, pending.rowid, pending.content_hash],
                ):
                    return False
                if pending.stale:
                    self._retract(conn, namespace, pending, [e.id for e in change.edges], now)
            self._write_change(conn, namespace, change, now)
            if extracted is not None:
                self._mark(conn, namespace, pending, extractor, now)
            return True

        return bool(self._write(work))

    def _write_change(self, conn: Conn, namespace: str, change: GraphWrite, now: int) -> None:
        run = self._rows
        for entity in change.entities:
            run(conn,
                "INSERT INTO entities (namespace, id, name, kind, aliases, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, id) DO NOTHING",
                [namespace, entity.id, entity.name, entity.kind, json.dumps(list(entity.aliases)),
                 now])  # fmt: skip
        for entity_id, aliases in change.aliases.items():
            run(conn, "UPDATE entities SET aliases = ? WHERE namespace = ? AND id = ?",
                [json.dumps(list(aliases)), namespace, entity_id])  # fmt: skip
        for entity_id, kind in change.kinds.items():
            run(conn,
                "UPDATE entities SET kind = ? WHERE namespace = ? AND id = ? AND kind = 'other'",
                [kind, namespace, entity_id])  # fmt: skip
        for a, b in change.same_as:
            run(conn,
                "INSERT INTO possibly_same_as (namespace, a, b) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                [namespace, *sorted((a, b))])  # fmt: skip
        for mention in change.mentions:
            run(conn,
                "INSERT INTO mentions (namespace, record, entity, spelling, provenance,"
                " known_from) SELECT r.namespace, r.rowid, ?, ?, ?, ? FROM records r"
                " WHERE r.namespace = ? AND r.id = ? ON CONFLICT DO NOTHING",
                [mention.entity, mention.spelling, _json(mention.provenance), now, namespace,
                 mention.record])  # fmt: skip
        for edge in change.edges:
            record = edge.provenance.get("record") if edge.provenance else None
            run(conn,
                f"INSERT INTO relations (namespace, record, {_EDGE_COLUMNS}, known_from)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (namespace, id) DO NOTHING",
                [namespace, record, edge.id, edge.subject, edge.predicate, edge.object,
                 edge.valid_from, edge.valid_to, edge.confidence, _json(edge.provenance), now],
            )  # fmt: skip

    def _retract(
        self, conn: Conn, namespace: str, pending: Pending, keep: list[str], now: int
    ) -> None:
        """The record was rewritten in place: what its old content said was never so.
        Its extracted mentions go (to the past: known until ``now``); its open facts
        close where they began (readable with include_expired, valid at no instant)."""
        where = "namespace = ? AND record = ? AND provenance IS NOT NULL"
        self._rows(
            conn,
            f"INSERT INTO past_mentions ({_MENTION_COLUMNS}, known_from, known_to)"
            f" SELECT {_MENTION_COLUMNS}, known_from, ? FROM mentions WHERE {where}",
            [now, namespace, pending.rowid],
        )
        self._rows(conn, f"DELETE FROM mentions WHERE {where}", [namespace, pending.rowid])
        keep_clause = f" AND id NOT IN ({_marks(keep)})" if keep else ""
        self._close(
            conn, "valid_from",
            f"namespace = ? AND record = ? AND valid_to IS NULL{keep_clause}",
            [namespace, pending.id, *keep], now,
        )  # fmt: skip

    def _close(self, conn: Conn, valid_to: str, where: str, params: list[Any], now: int) -> None:
        """Sets ``valid_to`` (an expression) on the edges ``where`` selects, keeping
        each one's version before (known until ``now``) in ``past_relations``."""
        self._rows(
            conn,
            f"INSERT INTO past_relations (namespace, record, {_EDGE_COLUMNS}, known_from,"
            f" known_to) SELECT namespace, record, {_EDGE_COLUMNS}, known_from, ?"
            f" FROM relations WHERE {where}",
            [now, *params],
        )
        self._rows(
            conn,
            f"UPDATE relations SET valid_to = {valid_to}, known_from = ? WHERE {where}",
            [now, *params],
        )

    def _mark(self, conn: Conn, namespace: str, pending: Pending, extractor: str, now: int) -> None:
        self._rows(
            conn,
            "DELETE FROM extraction_markers WHERE namespace = ? AND record = ?",
            [namespace, pending.rowid],
        )
        self._rows(
            conn,
            "INSERT INTO extraction_markers (namespace, record, extractor, at, content_hash)"
            " VALUES (?, ?, ?, ?, ?)",
            [namespace, pending.rowid, extractor, now, pending.content_hash],
        )

    def unswept(self, namespace: str) -> int:
        """How many open extracted facts cite a record that is no longer current."""
        with self._read() as conn:
            return int(self._rows(conn, f"SELECT count(*) FROM relations {_UNSWEPT}",
                                  [namespace])[0][0])  # fmt: skip

    def sweep(self, namespace: str, now: int) -> int:
        """Closes the open extracted facts whose record is no longer current (superseded
        or invalidated) at the instant it stopped being so, as recorded at ``now``.
        Asserted facts (no record) are never closed. Returns how many were closed."""
        valid_to = (
            "(SELECT CASE WHEN r.valid_to > relations.valid_from"
            f" THEN r.valid_to ELSE relations.valid_from END {_ENDED})"
        )
        unswept = _UNSWEPT.removeprefix("WHERE ")

        def work(conn: Conn) -> int:
            # counted first: a pipelined cursor has no rowcount until it syncs
            count = int(self._rows(conn, f"SELECT count(*) FROM relations {_UNSWEPT}",
                                   [namespace])[0][0])  # fmt: skip
            if count:
                self._close(conn, valid_to, unswept, [namespace], now)
            return count

        return self._write(work)

    def restore(self, namespace: str, rows: GraphRows, now: int) -> None:
        """A backup's graph rows for ``namespace``, in one transaction (:func:`restore`)."""
        self._write(lambda conn: restore(conn, namespace, rows, now))

    # -- expansion ------------------------------------------------------------------

    def expand(
        self,
        namespace: str,
        request: SearchRequest,
        window: Window | None,
        seeds: list[str],
        *,
        hops: int,
        limit: int,
    ) -> list[Reached]:
        """Records related to ``seeds`` (the direct hits, best first) through the graph,
        in scope and in time, at most ``limit``, nearest hops first, then by the rank of
        the record they were reached from, then by id. The seeds are never returned.
        With ``request.known_at``, the graph and the records as known at that instant."""
        walk = _Walk(self.d, namespace, request, window)
        reached: list[Reached] = []
        seen = list(seeds)
        frontier = list(seeds)
        with self._read() as conn:
            for hop in range(1, hops + 1):
                if not frontier or len(reached) >= limit:
                    break
                found = self._hop(conn, walk, frontier, seen, limit - len(reached))
                for record, origin, via in found:
                    reached.append(Reached(record, hop, origin, via))
                    seen.append(record.id)
                frontier = [r.record.id for r in reached if r.hops == hop]
        return reached

    def _hop(
        self, conn: Conn, walk: _Walk, frontier: list[str], seen: list[str], limit: int
    ) -> list[tuple[Record, str, list[dict[str, str]]]]:
        """One hop out from ``frontier``, best-ranked record first: each seed's related
        records precede the next seed's, so the walk stops as soon as ``limit`` are found."""
        found: list[tuple[Record, str, list[dict[str, str]]]] = []
        excluded = list(seen)
        for seed in frontier:
            if len(found) >= limit:
                break
            for record, via in self._from_seed(conn, walk, seed, excluded, limit - len(found)):
                found.append((record, seed, via))
                excluded.append(record.id)
        return found

    def _from_seed(
        self, conn: Conn, walk: _Walk, seed: str, excluded: list[str], limit: int
    ) -> list[tuple[Record, list[dict[str, str]]]]:
        """The first ``limit`` records (by id) in scope, not ``excluded``, that mention an
        entity one edge (valid in the window) away from an entity ``seed`` mentions."""
        paths: dict[str, tuple[str, str]] = {}  # far entity -> its lowest edge id, predicate
        sql, params = walk.edges(seed)
        for far, edge, predicate in self._rows(conn, sql, params):
            if far not in paths or edge < paths[far][0]:
                paths[far] = (edge, predicate)
        if not paths:
            return []
        far_test, far_params = self.d.in_list("m2.entity", sorted(paths))
        mentions, mention_params = walk.mentions()
        # from the related entities' mentions to their records (by rowid), in scope
        reaching = f"SELECT m2.record FROM {mentions} m2 WHERE m2.namespace = ? AND {far_test}"
        reaching_params = [*mention_params, walk.namespace, *far_params]
        sql, params = walk.records(reaching, reaching_params, excluded, limit)
        chosen = self._rows(conn, sql, params)
        if not chosen:
            return []
        record_test, record_params = self.d.in_list("m2.record", [row[0] for row in chosen])
        mentioned: dict[int, list[str]] = {}
        for record_rowid, entity in self._rows(
            conn,
            f"SELECT m2.record, m2.entity FROM {mentions} m2 WHERE m2.namespace = ?"
            f" AND {record_test} AND {far_test} ORDER BY m2.record, m2.entity",
            [*mention_params, walk.namespace, *record_params, *far_params],
        ):
            mentioned.setdefault(record_rowid, []).append(entity)
        out = []
        for row in chosen:
            entities = sorted(mentioned.get(row[0], []), key=lambda e: (paths[e][0], e))
            via = [{"entity": e, "predicate": paths[e][1], "edge": paths[e][0]}
                   for e in entities[:MAX_PATHS]]  # fmt: skip
            out.append((record_from_row(row, with_payload=walk.request.include_payload), via))
        return out


@dataclass(frozen=True)
class _Walk:
    """The statements of one expansion: over the graph and records of now, or (with
    ``request.known_at``) over the mentions, edge versions and record versions known
    at that instant."""

    d: Dialect
    namespace: str
    request: SearchRequest
    window: Window | None

    def _known(self, table: str, columns: str) -> tuple[str, list[Any]]:
        """``table`` as a derived table of the rows known at ``known_at``: the current
        ones recorded by then, and the past ones (``past_<table>``) current then."""
        known_at = self.request.known_at_us()
        if known_at is None:
            return table, []
        return (
            f"(SELECT {columns} FROM {table} WHERE namespace = ? AND known_from <= ?"
            f" UNION ALL SELECT {columns} FROM past_{table} WHERE namespace = ?"
            " AND known_from <= ? AND known_to > ?)",
            [self.namespace, known_at, self.namespace, known_at, known_at],
        )

    def mentions(self) -> tuple[str, list[Any]]:
        return self._known("mentions", "namespace, record, entity")

    def edges(self, seed: str) -> tuple[str, list[Any]]:
        """The far entity, edge id and predicate of each edge (valid in the window)
        from or to an entity ``seed`` mentions."""
        edge_time, edge_params = temporal_clause(self.d, "e", self.window, tombstones=False)
        mentions, mention_params = self.mentions()
        relations, relation_params = self._known(
            "relations", "namespace, id, subject, predicate, object, valid_from, valid_to"
        )

        # CROSS JOIN (conditions in WHERE) fixes SQLite's join order to the one that
        # reads only what the walk reaches; PostgreSQL plans it like any inner join.
        def step(near: str, far: str) -> tuple[str, list[Any]]:
            return (
                f"SELECT e.{far}, e.id, e.predicate FROM records s CROSS JOIN {mentions} m1"
                f" CROSS JOIN {relations} e WHERE s.namespace = ? AND s.id = ?"
                " AND m1.record = s.rowid AND m1.namespace = s.namespace"
                f" AND e.namespace = m1.namespace AND e.{near} = m1.entity AND {edge_time}",
                [*mention_params, *relation_params, self.namespace, seed, *edge_params],
            )

        (out, out_params), (back, back_params) = (
            step("subject", "object"),
            step("object", "subject"),
        )
        return f"{out} UNION ALL {back}", [*out_params, *back_params]

    def records(
        self, reaching: str, params: list[Any], excluded: list[str], limit: int
    ) -> tuple[str, list[Any]]:
        """The first ``limit`` records by id (``COLUMNS``) whose rowid ``reaching``
        selects, in scope and not ``excluded``: as known at ``known_at`` when set."""
        known_at = self.request.known_at_us()
        if known_at is None:
            scope, scope_params = scope_clause(
                self.d, "r", self.namespace, self.request, self.window
            )
            return (
                f"SELECT {prefixed('r')} FROM records r WHERE r.rowid IN ({reaching})"
                f" AND {scope} AND r.id NOT IN ({_marks(excluded)}) ORDER BY r.id LIMIT ?",
                [*params, *scope_params, *excluded, limit],
            )
        parts, all_params = [], []
        for half in known_scope(self.d, "r", self.namespace, self.request, self.window,
                                known_at):  # fmt: skip
            parts.append(
                f"SELECT {prefixed('r', half.record)} FROM {half.table} r"
                f" WHERE r.{half.record} IN ({reaching}) AND {half.where}"
                f" AND r.id NOT IN ({_marks(excluded)})"
            )
            all_params += [*params, *half.params, *excluded]
        return f"{' UNION ALL '.join(parts)} ORDER BY id LIMIT ?", [*all_params, limit]


Read = Callable[[str, Sequence[Any]], list[Any]]


def dump(read: Read, namespace: str, *, told: bool = False) -> GraphRows:
    """The namespace's graph as a backup holds it, from ``read``'s snapshot: every
    entity and ``possibly_same_as`` link, and every mention and edge version with its
    record-time range (the current ones and the past ones), and the extraction
    markers; with ``told``, only the mentions and edges a person told (no provenance)
    and no markers. Sorted in Python (code point order: the same on every backend,
    NULLs included)."""
    told_only = " AND m.provenance IS NULL" if told else ""
    rows = GraphRows()
    for row in read(
        "SELECT id, name, kind, aliases, created_at FROM entities WHERE namespace = ?",
        [namespace],
    ):
        rows.entities.append(RecordedEntity(_entity(row), row[4]))
    rows.entities.sort(key=lambda e: e.entity.id)
    rows.same_as = sorted(
        (row[0], row[1])
        for row in read("SELECT a, b FROM possibly_same_as WHERE namespace = ?", [namespace])
    )
    for table, known_to in (("mentions", "NULL"), ("past_mentions", "m.known_to")):
        for row in read(
            f"SELECT r.id, m.entity, m.spelling, m.provenance, m.known_from, {known_to}"
            f" FROM {table} m JOIN records r ON r.namespace = m.namespace"
            f" AND r.rowid = m.record WHERE m.namespace = ?{told_only}",
            [namespace],
        ):
            mention = Mention(row[0], row[1], row[2], json.loads(row[3]) if row[3] else None)
            rows.mentions.append(RecordedMention(mention, row[4], row[5]))
    rows.mentions.sort(key=lambda m: (m.mention.record, m.mention.entity, *_range(m)))
    for table, known_to in (("relations", "NULL"), ("past_relations", "m.known_to")):
        for row in read(
            f"SELECT {_edge_columns('m')}, m.known_from, {known_to} FROM {table} m"
            f" WHERE m.namespace = ?{told_only}",
            [namespace],
        ):
            rows.edges.append(RecordedEdge(_edge(row), row[8], row[9]))
    rows.edges.sort(key=lambda e: (e.edge.id, *_range(e)))
    if not told:
        rows.markers = sorted(
            (
                Marker(row[0], row[1], row[2], row[3])
                for row in read(
                    "SELECT r.id, x.extractor, x.at, x.content_hash FROM extraction_markers x"
                    " JOIN records r ON r.namespace = x.namespace AND r.rowid = x.record"
                    " WHERE x.namespace = ?",
                    [namespace],
                )
            ),
            key=lambda marker: marker.record,
        )
    return rows


def _range(row: RecordedMention | RecordedEdge) -> tuple[int, bool, int]:
    """A version's place among its row's versions: by record time, the current last."""
    return row.known_from, row.known_to is None, row.known_to or 0


def _edge_columns(alias: str) -> str:
    """The edge columns, each prefixed with ``alias``."""
    return ", ".join(f"{alias}.{column.strip()}" for column in _EDGE_COLUMNS.split(","))


def held(read: Read, namespace: str, entities: Sequence[str], edges: Sequence[str]) -> list[str]:
    """Which of these entity and edge ids the namespace already holds."""
    found: list[str] = []
    for table, ids in (("entities", entities), ("relations", edges)):
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            found += [row[0] for row in read(
                f"SELECT id FROM {table} WHERE namespace = ? AND id IN ({_marks(chunk)})"
                " ORDER BY id", [namespace, *chunk],
            )]  # fmt: skip
    return found


def restore(conn: Conn, namespace: str, rows: GraphRows, now: int) -> None:
    """Inside a write: writes a backup's graph rows as they were (record times kept)
    into ``namespace``, whose records are already restored; a mention or marker
    finds its record by id. One ``executemany`` per statement."""
    ns = namespace
    _run(conn, "INSERT INTO namespaces (name, created_at) VALUES (?, ?)"
         " ON CONFLICT (name) DO NOTHING", [ns, now])  # fmt: skip
    mention = (
        f"INSERT INTO {{}} ({_MENTION_COLUMNS}, known_from{{}}) SELECT r.namespace, r.rowid,"
        " ?, ?, ?, ?{} FROM records r WHERE r.namespace = ? AND r.id = ?"
    )
    edge = (
        f"INSERT INTO {{}} (namespace, record, {_EDGE_COLUMNS}, known_from{{}})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{})"
    )

    def mention_row(m: RecordedMention) -> list[Any]:
        known_to = [] if m.known_to is None else [m.known_to]
        return [m.mention.entity, m.mention.spelling, _json(m.mention.provenance),
                m.known_from, *known_to, ns, m.mention.record]  # fmt: skip

    def edge_row(v: RecordedEdge) -> list[Any]:
        e = v.edge
        record = e.provenance.get("record") if e.provenance else None
        known_to = [] if v.known_to is None else [v.known_to]
        return [ns, record, e.id, e.subject, e.predicate, e.object, e.valid_from, e.valid_to,
                e.confidence, _json(e.provenance), v.known_from, *known_to]  # fmt: skip

    current_m = [m for m in rows.mentions if m.known_to is None]
    past_m = [m for m in rows.mentions if m.known_to is not None]
    current_e = [v for v in rows.edges if v.known_to is None]
    past_e = [v for v in rows.edges if v.known_to is not None]
    writes: list[tuple[str, list[list[Any]]]] = [
        ("INSERT INTO entities (namespace, id, name, kind, aliases, created_at)"
         " VALUES (?, ?, ?, ?, ?, ?)",
         [[ns, x.entity.id, x.entity.name, x.entity.kind, json.dumps(list(x.entity.aliases)),
           x.created_at] for x in rows.entities]),
        ("INSERT INTO possibly_same_as (namespace, a, b) VALUES (?, ?, ?)",
         [[ns, a, b] for a, b in rows.same_as]),
        (mention.format("mentions", "", ""), [mention_row(m) for m in current_m]),
        (mention.format("past_mentions", ", known_to", ", ?"), [mention_row(m) for m in past_m]),
        (edge.format("relations", "", ""), [edge_row(v) for v in current_e]),
        (edge.format("past_relations", ", known_to", ", ?"), [edge_row(v) for v in past_e]),
        ("INSERT INTO extraction_markers (namespace, record, extractor, at, content_hash)"
         " SELECT r.namespace, r.rowid, ?, ?, ? FROM records r"
         " WHERE r.namespace = ? AND r.id = ?",
         [[x.extractor, x.at, x.content_hash, ns, x.record] for x in rows.markers]),
    ]  # fmt: skip
    for sql, params in writes:
        if params:
            conn.executemany(sql, params)


def forget(conn: Conn, namespace: str, record_id: str, rowid: int) -> None:
    """Inside a hard delete: removes the record's mentions, the edges it alone
    evidences (extracted from it), and any entity left with nothing pointing at it."""

    def run(sql: str, params: Sequence[Any]) -> list[Any]:
        return _run(conn, sql, params)

    touched = {row[0] for row in run(
        "SELECT entity FROM mentions WHERE namespace = ? AND record = ?"
        " UNION SELECT entity FROM past_mentions WHERE namespace = ? AND record = ?"
        " UNION SELECT subject FROM relations WHERE namespace = ? AND record = ?"
        " UNION SELECT object FROM relations WHERE namespace = ? AND record = ?"
        " UNION SELECT subject FROM past_relations WHERE namespace = ? AND record = ?"
        " UNION SELECT object FROM past_relations WHERE namespace = ? AND record = ?",
        [namespace, rowid, namespace, rowid, *[namespace, record_id] * 4],
    )}  # fmt: skip
    for table in ("relations", "past_relations"):
        run(f"DELETE FROM {table} WHERE namespace = ? AND record = ?", [namespace, record_id])
    for table in ("mentions", "past_mentions"):
        run(f"DELETE FROM {table} WHERE namespace = ? AND record = ?", [namespace, rowid])
    for entity_id in sorted(touched):
        orphan = not run(
            # one branch per index: an OR of subject and object would range over the
            # namespace's relations
            " UNION ALL ".join(
                f"SELECT 1 FROM {table} WHERE namespace = ? AND {column} = ?"
                for table, column in _ENTITY_USES
            ),
            [namespace, entity_id] * len(_ENTITY_USES),
        )
        if orphan:
            run("DELETE FROM possibly_same_as WHERE namespace = ? AND (a = ? OR b = ?)",
                [namespace, entity_id, entity_id])  # fmt: skip
            run("DELETE FROM entities WHERE namespace = ? AND id = ?", [namespace, entity_id])


def backfill_known_from(conn: Conn) -> None:
    """Gives the mentions and edges of a store written before the graph kept record
    time a ``known_from`` (a migration): a mention, its record's creation or (when
    extracted) the record's extraction, whichever is later; an edge, the later of its
    two entities' creation, which it cannot precede (both are written with it or
    before it)."""
    _run(
        conn,
        "UPDATE mentions SET known_from = (SELECT CASE WHEN x.at IS NOT NULL"
        " AND mentions.provenance IS NOT NULL AND x.at > r.created_at THEN x.at"
        " ELSE r.created_at END FROM records r LEFT JOIN extraction_markers x"
        " ON x.record = r.rowid WHERE r.namespace = mentions.namespace"
        " AND r.rowid = mentions.record)",
        [],
    )
    _run(
        conn,
        "UPDATE relations SET known_from = (SELECT coalesce(max(n.created_at), 0) FROM entities n"
        " WHERE n.namespace = relations.namespace"
        " AND n.id IN (relations.subject, relations.object))",
        [],
    )

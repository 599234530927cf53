"""Keeping memory safe (SPEC §9): ``backup``, ``export``, import of an export, ``check``.

    backup(memory, path)        a consistent online copy of a live SQLite store
    export_lines(memory, ns?)   JSON Lines: a header, settings, every version of every
                                record, then the graph
    import_export(memory, path) restores an export on either backend
    check(memory)               verifies the store's invariants -> CheckReport

**The export is canonical.** Line 1 is ``{"erstwhile":"export","format":2,"graph":G}``
(``G``: ``whole`` or ``told``). Then, per namespace, ``{"namespace", "settings":
{"embedder", "text_search"}}``; then every stored version of every record, exactly as
``get(ns, id, version=N)`` returns it (server fields included: trust, record times,
version, superseded_by), ordered by namespace, id and version; then one
``{"hard_deleted": id, "namespace": ns}`` line per hard-deleted id (the ledger's, ids
only), which explains a supersession link that ends at nothing; then, per namespace,
its graph (:func:`erstwhile.store.sql.graph.dump`): ``entity`` lines, ``same_as`` pairs,
``mention`` and ``edge`` lines each with its record-time range (``known_from``, and
``known_to`` for a retracted or replaced version), and ``extracted`` lines (which
content the extract job read). ``graph: told`` keeps only the mentions and edges a
person told (no provenance) and no markers: the import leaves the rest to the extract
job to derive again. Keys are sorted, no spaces. So the same store exports the same
bytes on SQLite and on PostgreSQL, and an export imported into either backend and
exported again is byte-identical. Vectors are derived and not exported: the embed
job rebuilds them (``erstwhile embed``). Format 1 (records and hard-deleted ids only)
still imports.

**Import restores, it does not write.** Versions are written as they were, ledgered
as ``import``; graph rows keep their record times; a record or graph id the store
already holds is refused before anything is written. Records are written in batches
(each record's versions in one transaction), each namespace's graph in one.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from erstwhile.domain.errors import InvalidInput, WriteConflict
from erstwhile.domain.graph import (
    Entity,
    GraphRows,
    Marker,
    Mention,
    RecordedEdge,
    RecordedEntity,
    RecordedMention,
    Relationship,
)
from erstwhile.domain.records import Record, validate_namespace, validate_record_id
from erstwhile.domain.time import format_instant, now_us, parse_instant
from erstwhile.domain.validation import as_invalid_input
from erstwhile.domain.words import check_language
from erstwhile.memory import Memory
from erstwhile.service import LOCAL_ACTOR
from erstwhile.store.sql import graph as graph_store
from erstwhile.store.sql import maintenance
from erstwhile.store.sql.maintenance import Finding

FORMAT = 2
#: What a backup holds of the graph: ``whole`` (every row, derived ones too) or
#: ``told`` (what people told it; the extract job derives the rest again on import).
GRAPH_MODES = ("whole", "told")
#: The header of the first format (records only), still read.
HEADER_V1: dict[str, Any] = {"format": 1, "erstwhile": "export"}
HEADER: dict[str, Any] = {"erstwhile": "export", "format": FORMAT, "graph": "whole"}
RESTORE_BATCH = 500
_GRAPH_LINES = ("entity", "same_as", "mention", "edge", "extracted")
#: How a settings or graph line starts (keys sorted); a record's starts with "content".
_OTHER_LINES = ('{"edge":', '{"entity":', '{"extracted":', '{"mention":', '{"namespace":')


def header(graph: str = "whole") -> dict[str, Any]:
    return {**HEADER, "graph": graph}


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def backup(memory: Memory, path: str | os.PathLike[str]) -> None:
    """Copies a live SQLite store to ``path`` (a new file), safe while writers run."""
    memory.service.store.backup(str(Path(path).expanduser()))


def _settings(memory: Memory, read: maintenance.Read, namespace: str) -> dict[str, Any]:
    embedder = memory.service.embedder_for(namespace)
    return {
        "embedder": None if embedder is None
        else {"id": embedder.embedder_id, "dimensions": embedder.dimensions},
        "text_search": maintenance.text_search(read, namespace),
    }  # fmt: skip


def _graph_lines(rows: GraphRows) -> Iterator[dict[str, Any]]:
    # a graph's rows share their few record times: each formatted once
    instant = functools.lru_cache(maxsize=1 << 16)(format_instant)

    def known(data: dict[str, Any], known_from: int, known_to: int | None) -> dict[str, Any]:
        data["known_from"] = instant(known_from)
        if known_to is not None:
            data["known_to"] = instant(known_to)
        return data

    for e in rows.entities:
        yield {"entity": {**e.entity.to_json(), "created_at": instant(e.created_at)}}
    for pair in rows.same_as:
        yield {"same_as": list(pair)}
    for m in rows.mentions:
        yield {"mention": known(m.mention.to_json(), m.known_from, m.known_to)}
    for v in rows.edges:
        yield {"edge": known(v.edge.to_json(), v.known_from, v.known_to)}
    for marker in rows.markers:
        data = {"record": marker.record, "extractor": marker.extractor,
                "at": instant(marker.at)}  # fmt: skip
        if marker.content_hash is not None:
            data["content_hash"] = marker.content_hash
        yield {"extracted": data}


def export_lines(
    memory: Memory, namespace: str | None = None, *, graph: str = "whole"
) -> Iterator[str]:
    """The export, line by line (without newlines), read from one snapshot. ``graph``:
    ``whole`` (every graph row) or ``told`` (only what people told it)."""
    if namespace is not None:
        validate_namespace(namespace)
    if graph not in GRAPH_MODES:
        raise InvalidInput(f"graph must be one of {', '.join(GRAPH_MODES)}, got {graph!r}")
    yield _line(header(graph))
    with memory.service.store.reader() as read:
        names = maintenance.namespaces(read, namespace)
        for ns in names:
            yield _line({"namespace": ns, "settings": _settings(memory, read, ns)})
        for record in maintenance.versions(read, namespace):
            yield _line(record.to_json())
        for ns, record_id in maintenance.hard_deleted(read, namespace):
            yield _line({"hard_deleted": record_id, "namespace": ns})
        for ns in names:
            for data in _graph_lines(graph_store.dump(read, ns, told=graph == "told")):
                yield _line({**data, "namespace": ns})


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with an export header (of any format)."""
    try:
        with open(path, encoding="utf-8") as file:
            first = json.loads(file.readline())
        return isinstance(first, dict) and first.get("erstwhile") == "export"
    except (OSError, UnicodeDecodeError, ValueError):
        return False


@dataclass(frozen=True)
class RestoreReport:
    records: int
    versions: int
    namespaces: list[str]
    #: graph rows restored: entities, mentions and edge versions
    entities: int = 0
    mentions: int = 0
    edges: int = 0
    warnings: list[str] = field(default_factory=list)


# -- reading an export -------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Embedder(_Strict):
    id: str
    dimensions: int


class _Settings(_Strict):
    embedder: _Embedder | None
    text_search: str


class _Entity(_Strict):
    id: str
    name: str
    kind: str
    aliases: list[str]
    created_at: str


class _Known(_Strict):
    known_from: str
    known_to: str | None = None
    provenance: dict[str, Any] | None = None


class _Mention(_Known):
    record: str
    entity: str
    spelling: str


class _Edge(_Known):
    id: str
    subject: str
    predicate: str
    object: str
    valid_from: str
    valid_to: str | None = None
    confidence: float


class _Marker(_Strict):
    record: str
    extractor: str
    at: str
    content_hash: str | None = None


@dataclass
class _Export:
    graph: str | None  # None: format 1, no graph and no settings
    settings: dict[str, _Settings] = field(default_factory=dict)
    records: list[list[Record]] = field(default_factory=list)
    gone: list[tuple[str, str]] = field(default_factory=list)
    graphs: dict[str, GraphRows] = field(default_factory=dict)


def _header(line: str, path: Path) -> str | None:
    """The graph mode the header announces (None for format 1)."""
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if data == HEADER_V1:
        return None
    if not isinstance(data, dict) or data.get("erstwhile") != "export":
        raise InvalidInput(f"{path.name} is not an erstwhile export (no header)")
    if data.get("format") != FORMAT:
        raise InvalidInput(
            f"{path.name} is an export of format {data.get('format')!r}; this erstwhile "
            f"reads formats 1 and {FORMAT}: import it with the erstwhile that wrote it"
        )
    if set(data) != set(HEADER) or data["graph"] not in GRAPH_MODES:
        raise InvalidInput(
            f"{path.name}: the header's graph must be one of {', '.join(GRAPH_MODES)}"
        )
    return str(data["graph"])


@functools.lru_cache(maxsize=1 << 16)
def _parsed(value: str) -> int | None:
    """An instant's microseconds, or None if it is not one (the caller says why, naming
    its field). Cached: a graph's rows share their few record times."""
    try:
        return parse_instant(value, "instant")
    except InvalidInput:
        return None


def _at(value: str, where: str) -> int:
    us = _parsed(value)
    return parse_instant(value, where) if us is None else us


def _instant(value: str | None, where: str) -> int | None:
    return None if value is None else _at(value, where)


class _Reader:
    """Reads an export's lines into an :class:`_Export`, checking each (and how they
    refer to each other) before anything is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.out = _Export(graph=None)
        self.entity_ids: dict[str, set[str]] = {}
        self.record_ids: dict[str, set[str]] = {}

    def read(self) -> _Export:
        with open(self.path, encoding="utf-8") as file:
            for number, line in enumerate(file, start=1):
                if number == 1:
                    if not line.strip():
                        raise InvalidInput(
                            f"{self.path.name} is not an erstwhile export (no header)"
                        )
                    self.out.graph = _header(line, self.path)
                elif line.strip():
                    self._line(number, line)
        return self.out

    def _line(self, number: int, line: str) -> None:
        where = f"line {number}"
        if line.startswith('{"hard_deleted":'):
            entry = json.loads(line)
            validate_namespace(entry.get("namespace"))
            validate_record_id(entry["hard_deleted"], f"{where}: hard_deleted")
            self.out.gone.append((entry["namespace"], entry["hard_deleted"]))
            return
        if self.out.graph is not None and line.startswith(_OTHER_LINES):
            try:
                data = json.loads(line)
            except ValueError:
                raise InvalidInput(f"{where} is not valid JSON") from None
            kinds = [k for k in ("settings", *_GRAPH_LINES) if k in data]
            if len(kinds) != 1 or set(data) != {kinds[0], "namespace"}:
                raise InvalidInput(
                    f"{where}: a settings or graph line holds one of "
                    f"{', '.join(('settings', *_GRAPH_LINES))} and 'namespace', nothing else"
                )
            namespace = validate_namespace(data["namespace"])
            try:
                self._graph_line(kinds[0], namespace, data[kinds[0]])
            except ValidationError as error:
                raise as_invalid_input(error, f"{where}: {kinds[0]}") from None
            except InvalidInput as error:
                raise InvalidInput(f"{where}: {error.message}") from None
            return
        self._record(number, line)

    def _record(self, number: int, line: str) -> None:
        try:
            record = Record.model_validate_json(line)
        except ValidationError as error:
            raise as_invalid_input(error, f"line {number}") from None
        validate_namespace(record.namespace)
        records = self.out.records
        last = records[-1][-1] if records else None
        if last is not None and (last.namespace, last.id) == (record.namespace, record.id):
            if record.version != (last.version or 0) + 1:
                raise InvalidInput(
                    f"line {number}: version {record.version} of {record.id!r} follows "
                    f"version {last.version}; an export lists every version in order"
                )
            records[-1].append(record)
        elif record.version != 1:
            raise InvalidInput(
                f"line {number}: {record.id!r} starts at version {record.version}, not 1"
            )
        else:
            records.append([record])
            self.record_ids.setdefault(record.namespace, set()).add(record.id)

    def _entity(self, namespace: str, entity_id: str, field_name: str) -> None:
        if entity_id not in self.entity_ids.get(namespace, ()):
            raise InvalidInput(
                f"{field_name} {entity_id!r} is no entity line of namespace {namespace!r}"
                " before it; an export lists a namespace's entities first"
            )

    def _known_record(self, namespace: str, record_id: str, field_name: str) -> None:
        if record_id not in self.record_ids.get(namespace, ()):
            raise InvalidInput(
                f"{field_name} {record_id!r} is no record of namespace {namespace!r} in the export"
            )

    def _graph_line(self, kind: str, namespace: str, value: Any) -> None:
        rows = self.out.graphs.setdefault(namespace, GraphRows())
        if kind == "settings":
            settings = _Settings.model_validate(value)
            check_language(settings.text_search, "settings.text_search")
            if namespace in self.out.settings:
                raise InvalidInput(f"namespace {namespace!r} has a settings line already")
            self.out.settings[namespace] = settings
        elif kind == "entity":
            e = _Entity.model_validate(value)
            ids = self.entity_ids.setdefault(namespace, set())
            if e.id in ids:
                raise InvalidInput(f"entity {e.id!r} is listed twice")
            ids.add(e.id)
            created = _at(e.created_at, "entity.created_at")
            rows.entities.append(
                RecordedEntity(Entity(e.id, e.name, e.kind, tuple(e.aliases)), created)
            )
        elif kind == "same_as":
            if not (isinstance(value, list) and len(value) == 2
                    and all(isinstance(v, str) for v in value)):  # fmt: skip
                raise InvalidInput("same_as must be a pair of entity ids [a, b]")
            for entity_id in value:
                self._entity(namespace, entity_id, "same_as")
            rows.same_as.append((value[0], value[1]))
        elif kind == "mention":
            m = _Mention.model_validate(value)
            self._known_record(namespace, m.record, "mention.record")
            self._entity(namespace, m.entity, "mention.entity")
            rows.mentions.append(RecordedMention(
                Mention(m.record, m.entity, m.spelling, m.provenance),
                _at(m.known_from, "mention.known_from"),
                _instant(m.known_to, "mention.known_to"),
            ))  # fmt: skip
        elif kind == "edge":
            v = _Edge.model_validate(value)
            self._entity(namespace, v.subject, "edge.subject")
            self._entity(namespace, v.object, "edge.object")
            edge = Relationship(
                v.id, v.subject, v.predicate, v.object,
                _at(v.valid_from, "edge.valid_from"),
                _instant(v.valid_to, "edge.valid_to"), v.confidence, v.provenance,
            )  # fmt: skip
            rows.edges.append(RecordedEdge(
                edge, _at(v.known_from, "edge.known_from"),
                _instant(v.known_to, "edge.known_to"),
            ))  # fmt: skip
        else:
            x = _Marker.model_validate(value)
            self._known_record(namespace, x.record, "extracted.record")
            rows.markers.append(
                Marker(x.record, x.extractor, _at(x.at, "extracted.at"), x.content_hash)
            )


def _conflicts(memory: Memory, export: _Export) -> None:
    """Refuses (writing nothing) when the store holds one of the exported ids."""
    by_namespace: dict[str, list[str]] = {}
    for versions in export.records:
        by_namespace.setdefault(versions[0].namespace, []).append(versions[0].id)
    with memory.service.store.reader() as read:
        for namespace, ids in by_namespace.items():
            held = maintenance.existing_ids(read, namespace, ids)
            if held:
                raise WriteConflict(
                    f"namespace {namespace!r} already holds {len(held)} of the exported "
                    f"records (e.g. {held[0]!r}); import an export into an empty store"
                )
        for namespace, rows in export.graphs.items():
            held = graph_store.held(
                read, namespace, [e.entity.id for e in rows.entities],
                sorted({v.edge.id for v in rows.edges}),
            )  # fmt: skip
            if held:
                raise WriteConflict(
                    f"namespace {namespace!r} already holds {len(held)} of the exported "
                    f"entities and edges (e.g. {held[0]!r}); import an export into an "
                    "empty store"
                )


def _embedder_warnings(memory: Memory, export: _Export) -> list[str]:
    warnings = []
    for namespace, settings in sorted(export.settings.items()):
        was = settings.embedder
        here = memory.service.embedder_for(namespace)
        if (was and (was.id, was.dimensions)) == (here and (here.embedder_id, here.dimensions)):
            continue
        named = f"{was.id} ({was.dimensions} dimensions)" if was else "none"
        warnings.append(
            f"namespace {namespace!r} was exported with embedder {named}, and this "
            f"store binds it to {here.embedder_id if here else 'none'}: bind the same under "
            f"[namespaces.{namespace}.embedding] to search it as before, then run "
            "erstwhile embed"
        )
    return warnings


def import_export(
    memory: Memory, path: str | os.PathLike[str], *, actor: str = LOCAL_ACTOR
) -> RestoreReport:
    """Restores an export into ``memory`` (any backend): namespace settings first
    (the text-search language), then the records, then the graph. Refuses, writing
    nothing, when a line is malformed or the store already holds one of the exported
    ids. An embedder binding is configuration: a namespace bound here to another
    embedder than the export names gets a warning, not a refusal."""
    export = _Reader(Path(path)).read()
    _conflicts(memory, export)
    store = memory.service.store
    warnings = _embedder_warnings(memory, export)
    if export.graph == "told":
        warnings.append(
            "the export holds only the graph people told it (graph: told): run "
            "erstwhile extract to derive the rest from the records again"
        )
    now = now_us()
    for namespace, settings in sorted(export.settings.items()):
        store.set_text_search(namespace, settings.text_search)
    records = export.records
    for start in range(0, len(records), RESTORE_BATCH):
        store.restore(records[start : start + RESTORE_BATCH], now=now, actor=actor)
    store.restore([], now=now, actor=actor, hard_deleted=export.gone)
    for namespace, rows in sorted(export.graphs.items()):
        store.graph.restore(namespace, rows, now)
    graphs = export.graphs.values()
    return RestoreReport(
        records=len(records),
        versions=sum(len(v) for v in records),
        namespaces=sorted({v[0].namespace for v in records} | set(export.settings)),
        entities=sum(len(rows.entities) for rows in graphs),
        mentions=sum(len(rows.mentions) for rows in graphs),
        edges=sum(len(rows.edges) for rows in graphs),
        warnings=warnings,
    )


@dataclass
class CheckReport:
    backend: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "backend": self.backend,
            "checks": [finding.to_json() for finding in self.findings],
        }


def check(memory: Memory) -> CheckReport:
    """Verifies the store: the backend's own integrity, then the invariants erstwhile
    keeps (keys, chains, versions, ledger) and the vectors of each namespace's
    current embedder against its backlog."""
    service = memory.service
    store = service.store
    report = CheckReport(backend=store.backend, findings=store.integrity())
    vectors = Finding("embedder vectors")
    with store.reader() as read:
        report.findings += maintenance.invariants(read, store.backend, now_us())
        for namespace in store.namespaces():
            embedder = service.embedder_for(namespace)
            if embedder is None:
                continue
            maintenance.embedder_vectors(
                read, vectors, namespace, embedder.embedder_id, embedder.dimensions
            )
            backlog = store.backlog_count(namespace, embedder.embedder_id)
            if backlog:
                vectors.notes.append(
                    f"{namespace}: {backlog} records wait for a {embedder.embedder_id} "
                    "vector (erstwhile embed fills the backlog)"
                )
    report.findings.append(vectors)
    return report

"""The mine job (SPEC §9): a folder's documents as records, kept in step with it.

Each chunk (:mod:`erstwhile.jobs.chunking`) of each document (:mod:`erstwhile.jobs.folder`)
is one record of kind ``document`` (``code`` for source code) with
``origin {source, document, chunk, revision}``: the folder, the file's path in it, the
chunk's position when this version was written, and the file's revision (a hash of its
bytes) then. Its metadata holds ``document`` and ``section`` (the heading path or the
definition name), so a search can be scoped to one file.

**Chunk identity: (document, section, content), not position.** Re-mining compares a
document's chunks with its current records:

1. A chunk whose section and content hash equal a current record's *is* that record,
   wherever it now stands: nothing is written, not a version, not a ledger row. So a
   paragraph inserted at the top adds one record and leaves every chunk below alone,
   and a moved paragraph is unchanged.
2. A chunk left over is an *edit* of a left-over record of the same section when their
   words overlap enough (Dice coefficient over word counts ≥ 0.5, heading words
   aside; pairs taken best first, then nearest position, then by id) and they stood
   within 64 positions of each other: it supersedes that record.
3. Any other left-over chunk is added; any other left-over record is invalidated.

Positions are not identity because they shift on every insertion, and neither is
content alone, because an edit must supersede (so ``history`` shows both versions)
rather than look like a deletion and an unrelated addition. Record ids are derived from
(source, document, section, content hash), with a counter for the first id not yet
used by that document, so a run repeated from the same state writes the same ids.

**Time.** A new document's records are valid from the file's modification time (never
later than now). A changed document's new and superseding records are valid from its
new modification time — at which instant the superseded and vanished ones close — kept
later than every validity it closes. A document that is gone (deleted, renamed,
now ignored, binary or unreadable) has its current records invalidated at the instant
the run started.

**Resumable.** Every change to one document is one group of the batch writer
(:mod:`erstwhile.jobs.batches`): written whole in one transaction or not at all. A run
killed at any point and run again finds the documents it finished unchanged and does
the rest, leaving exactly the records one clean run would have. Two runs must not mine
the same source into the same namespace at once (one process serialises its own).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
import threading
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Origin, Record
from erstwhile.domain.time import from_us, now_us, to_us
from erstwhile.jobs.batches import DEFAULT_BATCH_SIZE, BatchWriter, Invalidation, Progress, Write
from erstwhile.jobs.chunking import Chunk, DocumentKind, chunk_document
from erstwhile.jobs.embed import this_process
from erstwhile.jobs.files import Refused, shown, storable
from erstwhile.jobs.folder import (
    DEFAULT_MAX_BYTES,
    Document,
    Refusal,
    Skipped,
    patterns,
    read,
    scan,
)
from erstwhile.jobs.rows import job_row
from erstwhile.store.base import Store

log = logging.getLogger("erstwhile.jobs")

KINDS = {DocumentKind.MARKDOWN: "document", DocumentKind.TEXT: "document",
         DocumentKind.CODE: "code"}  # fmt: skip
SIMILARITY = 0.5
PAIR_WINDOW = 64
ID_PREFIX = "mine-"


class MineRequest(BaseModel):
    """What to mine: a folder (``path``), which of its files, and as which source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, description="The folder to mine.")
    include: list[str] = Field(
        default_factory=list,
        description="Gitignore-style patterns; when given, only files matching one are mined"
        " (and a matching file of an unknown type is read as text).",
    )
    exclude: list[str] = Field(
        default_factory=list, description="Gitignore-style patterns of files not to mine."
    )
    source: str | None = Field(
        default=None,
        min_length=1,
        description="origin.source of the records (default: the folder's absolute path).",
    )
    batch_size: int = Field(
        default=DEFAULT_BATCH_SIZE, ge=1, description="Records per transaction."
    )
    max_bytes: int = Field(
        default=DEFAULT_MAX_BYTES, ge=1, description="Files larger than this are skipped."
    )

    def folder(self) -> Path:
        folder = Path(self.path).expanduser()
        if not folder.is_dir():
            raise InvalidInput(
                f"path {self.path!r} is not a folder this process can read; mine takes a "
                "directory of documents"
            )
        return folder.resolve()


@dataclass(frozen=True)
class MineReport:
    """What a mine did: documents read, chunks found in them, and what was written."""

    job_id: int
    namespace: str
    source: str
    documents: int
    chunks: int
    added: int
    superseded: int
    unchanged: int
    invalidated: int
    removed_documents: int
    skipped: dict[str, int]
    batches: int
    warnings: list[str] = field(default_factory=list)
    #: the files left out for a reason other than ignored or unsupported, by name
    refused: list[Refusal] = field(default_factory=list)


# -- one document --------------------------------------------------------------------


@dataclass
class Match:
    """How a document's chunks meet its current records."""

    unchanged: list[tuple[Record, int]] = field(default_factory=list)
    edited: list[tuple[Record, int]] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    vanished: list[Record] = field(default_factory=list)


def section_of(record: Record) -> str:
    return record.metadata.get("section", "")


def position_of(record: Record) -> int:
    return record.origin.chunk if record.origin is not None else 0


def is_current(record: Record) -> bool:
    """A mined record the folder still speaks for: not superseded, ended or deleted."""
    return record.superseded_by is None and record.valid_to is None and record.deleted_at is None


def _words(text: str, section: str) -> Counter[str]:
    words = Counter(re.findall(r"\w+", text.lower()))
    words.subtract(re.findall(r"\w+", section.lower()))  # the heading path every chunk repeats
    return +words


def similarity(a: Counter[str], b: Counter[str]) -> float:
    """Dice coefficient of two word counts: 1 for the same words, 0 for none shared."""
    total = a.total() + b.total()
    return 2 * (a & b).total() / total if total else 0.0


def match(current: Sequence[Record], chunks: Sequence[Chunk]) -> Match:
    """Pairs a document's chunks with its current records (see the module's notes)."""
    found = Match()
    waiting: dict[tuple[str, str], deque[Record]] = defaultdict(deque)
    for record in sorted(current, key=lambda r: (position_of(r), r.id)):
        waiting[(section_of(record), record.content_hash())].append(record)
    for index, chunk in enumerate(chunks):
        same = waiting.get((chunk.section, chunk.digest))
        if same:
            found.unchanged.append((same.popleft(), index))
        else:
            found.added.append(index)
    left = sorted((r for queue in waiting.values() for r in queue),
                  key=lambda r: (position_of(r), r.id))  # fmt: skip
    words = {i: _words(chunks[i].content, chunks[i].section) for i in found.added}
    candidates = []
    for record in left:
        mine = _words(record.content, section_of(record))
        for index in found.added:
            distance = abs(index - position_of(record))
            if chunks[index].section != section_of(record) or distance > PAIR_WINDOW:
                continue
            score = similarity(mine, words[index])
            if score >= SIMILARITY:
                candidates.append((-score, distance, position_of(record), record.id, index, record))
    candidates.sort(key=lambda c: c[:5])
    taken_records: set[str] = set()
    taken_chunks: set[int] = set()
    for *_, index, record in candidates:
        if record.id not in taken_records and index not in taken_chunks:
            found.edited.append((record, index))
            taken_records.add(record.id)
            taken_chunks.add(index)
    found.added = [i for i in found.added if i not in taken_chunks]
    found.vanished = [r for r in left if r.id not in taken_records]
    return found


def chunk_id(source: str, document: str, chunk: Chunk, used: set[str]) -> str:
    """The first id derived from the chunk's identity that ``used`` does not hold."""
    for n in itertools.count():
        basis = "\x00".join((source, document, chunk.section, chunk.digest, str(n)))
        candidate = ID_PREFIX + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:32]
        if candidate not in used:
            used.add(candidate)
            return candidate
    raise AssertionError("unreachable")


@dataclass
class Changes:
    """What re-mining one document writes, as one group of the batch writer."""

    records: list[tuple[Record, str]] = field(default_factory=list)
    invalidations: list[Invalidation] = field(default_factory=list)
    unchanged: int = 0
    added: int = 0
    superseded: int = 0


def _closing_instant(current: Iterable[Record], at: int) -> int:
    """``at``, moved later if needed to stay after every validity it closes."""
    starts = [to_us(r.valid_from) for r in current if r.valid_from is not None]
    return max([at, *(start + 1 for start in starts)])


def plan_document(
    *,
    source: str,
    document: str,
    kind: DocumentKind,
    revision: str,
    mtime: int,
    chunks: Sequence[Chunk],
    known: Sequence[Record],
    now: int,
) -> Changes:
    """The writes that bring one document's records in step with its ``chunks``;
    ``known`` holds every record mined from it before, in any state."""
    current = [r for r in known if is_current(r)]
    found = match(current, chunks)
    changes = Changes(unchanged=len(found.unchanged))
    if not (found.edited or found.added or found.vanished):
        return changes
    start = _closing_instant(current, min(mtime, now))
    used = {r.id for r in known}
    replaces = {index: record.id for record, index in found.edited}
    for index in sorted([*replaces, *found.added]):
        chunk = chunks[index]
        metadata = {"document": document}
        if chunk.section:
            metadata["section"] = chunk.section
        record = Record(
            id=chunk_id(source, document, chunk, used),
            content=chunk.content,
            kind=KINDS[kind],
            metadata=metadata,
            origin=Origin(source=source, document=document, chunk=index, revision=revision),
            valid_from=from_us(start),
            supersedes=[replaces[index]] if index in replaces else [],
        )
        changes.records.append((record, f"{document} chunk {index}"))
    changes.invalidations = [(record.id, start) for record in found.vanished]
    changes.superseded = len(found.edited)
    changes.added = len(found.added)
    return changes


def vanish_document(known: Sequence[Record], now: int) -> list[Invalidation]:
    """Invalidations that close a vanished document's current records at ``now``."""
    current = [r for r in known if is_current(r)]
    at = _closing_instant(current, now)
    return [(record.id, at) for record in current]


# -- the job -------------------------------------------------------------------------


def run_mine_job(
    store: Store,
    write: Write,
    namespace: str,
    request: MineRequest,
    *,
    progress: Progress | None = None,
    lock: threading.Lock | None = None,
    stop: threading.Event | None = None,
) -> MineReport:
    """Mines ``request.path`` into ``namespace``, recording the run as a ``mine`` job
    row (:func:`~erstwhile.jobs.rows.job_row`: it always ends); writes through
    ``write`` (one call per batch). ``progress(documents done, documents)`` is told
    after every document. ``lock``: held while it works, waited for after its row is
    open; ``stop``: when set, the job ends ``interrupted`` after the document at hand."""
    folder = request.folder()
    source = request.source or folder.as_posix()
    if not storable(source):
        raise InvalidInput(
            f"path '{shown(source)}' is not UTF-8, so it cannot be stored as origin.source; "
            "name the source with source (--source NAME)"
        )
    include = patterns(request.include, "include")
    exclude = patterns(request.exclude, "exclude")
    now = now_us()
    tally: Counter[str] = Counter()
    skipped = Skipped()
    with job_row(store, "mine", namespace, this_process(), lock=lock, stop=stop) as row:

        def durable(done: int, total: int) -> None:
            row.update(done)

        writer = BatchWriter(write, f"mine {source}", request.batch_size, progress=durable)
        found = scan(
            folder, include=include, exclude=exclude, max_bytes=request.max_bytes,
            skipped=skipped,
        )  # fmt: skip
        documents = {document.path: document for document in found}
        known: dict[str, list[Record]] = defaultdict(list)
        for record in store.origin_records(namespace, source):
            if record.origin is not None:
                known[record.origin.document].append(record)
        tracked = {path for path, records in known.items() if any(map(is_current, records))}
        paths = sorted(documents.keys() | tracked)
        writer.total = len(paths)
        for position, path in enumerate(paths, start=1):
            row.check()
            _mine_document(writer, documents.get(path), path, known.get(path, []),
                           source=source, now=now, tally=tally, skipped=skipped,
                           max_bytes=request.max_bytes)  # fmt: skip
            if progress is not None:
                progress(position, len(paths))
        writer.finish()
        row.done = writer.done
    for refusal in skipped.refusals:
        log.info("mine job %s: %s left out: %s (%s)", row.id, refusal.path, refusal.reason,
                 refusal.detail)  # fmt: skip
    return MineReport(
        job_id=row.id, namespace=namespace, source=source, documents=tally["documents"],
        chunks=tally["chunks"], added=tally["added"], superseded=tally["superseded"],
        unchanged=tally["unchanged"], invalidated=writer.invalidated,
        removed_documents=tally["removed"], skipped=dict(skipped.counts),
        batches=writer.batches, warnings=writer.warnings, refused=skipped.refusals,
    )  # fmt: skip


def _mine_document(
    writer: BatchWriter,
    document: Document | None,
    path: str,
    known: list[Record],
    *,
    source: str,
    now: int,
    tally: Counter[str],
    skipped: Skipped,
    max_bytes: int,
) -> None:
    text = None
    if document is not None:
        try:
            text = read(document, max_bytes=max_bytes)
        except Refused as refused:
            skipped.refuse(path, refused.reason, refused.detail)
        except OSError as error:
            skipped.refuse(path, "unreadable", error.strerror or str(error))
        else:
            if text is None:
                skipped.refuse(path, "binary", "a NUL byte, or not UTF-8")
    if text is None or document is None:
        invalidations = vanish_document(known, now)
        if invalidations:
            tally["removed"] += 1
        writer.add([], invalidations)
        return
    chunks = chunk_document(text.content, document.kind)
    changes = plan_document(
        source=source, document=path, kind=document.kind, revision=text.revision,
        mtime=document.mtime, chunks=chunks, known=known, now=now,
    )  # fmt: skip
    writer.add(changes.records, changes.invalidations)
    tally.update(documents=1, chunks=len(chunks), unchanged=changes.unchanged,
                 added=changes.added, superseded=changes.superseded)  # fmt: skip

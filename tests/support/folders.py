"""Generated folders for the mining tests, and the brute-force expectation of what
mining them must leave, written from SPEC §9 and docs/mining.md alone.

A :class:`Folder` writes real files (Markdown with one heading, and plain text), each
paragraph long enough to be a chunk of its own and made of random words, so two
paragraphs share few words while an edit (three words changed) keeps most. It
remembers every paragraph as a *chain*: the contents it has had, oldest first, the
instant each became valid (the file's modification time, which the folder sets
itself, one second per change), and whether and when the chain ended.
:func:`check` compares a store with that expectation: every record, every
supersession link and instant, every invalidation, and ``history``.
"""

from __future__ import annotations

import itertools
import os
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import raw

import erstwhile
from erstwhile.domain.records import Record
from erstwhile.domain.time import to_us

SECOND = 1_000_000
START = 1_735_689_600 * SECOND  # 2025-01-01: every change is in the past
RUN = "run"  # an end the mine that notices it sets (its start), not a file's time


@dataclass
class Chain:
    document: str
    versions: list[tuple[str, int]] = field(default_factory=list)  # (content, valid_from)
    end: int | str | tuple[int, int] | None = None  # an instant, RUN, or a mine's window


class Folder:
    """A folder of documents on disk and the chains mining it must produce."""

    def __init__(self, root: Path, seed: int = 0) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed)
        self.vocabulary = sorted(
            {"".join(self.rng.choices(string.ascii_lowercase, k=self.rng.randint(4, 9)))
             for _ in range(3000)}
        )  # fmt: skip
        self.clock = START
        self.docs: dict[str, list[int]] = {}  # path -> chain numbers, in document order
        self.texts: dict[int, str] = {}  # chain number -> its paragraph now
        self.titles: dict[str, str] = {}
        self.mtimes: dict[str, int] = {}
        self.chains: list[Chain] = []
        self.ignore_lines: list[str] = []
        self.counter = 0

    # -- what a document looks like -----------------------------------------------

    def paragraph(self) -> str:
        words = self.rng.choices(self.vocabulary, k=self.rng.randint(55, 70))
        return " ".join(words) + "."

    def _content(self, path: str, text: str) -> str:
        """A chunk's content: a paragraph, after its heading path in Markdown."""
        return f"{self.titles[path]}\n\n{text}" if path in self.titles else text

    def _write(self, path: str) -> None:
        paragraphs = [self.texts[c] for c in self.docs[path]]
        if path in self.titles:
            paragraphs = [f"# {self.titles[path]}", *paragraphs]
        file = self.root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        self.clock += SECOND
        os.utime(file, ns=(self.clock * 1000, self.clock * 1000))
        self.mtimes[path] = self.clock

    def _new_chain(self, path: str, text: str) -> int:
        self.chains.append(Chain(path))
        number = len(self.chains) - 1
        self.texts[number] = text
        return number

    def _start_versions(self, path: str, numbers: list[int]) -> None:
        for number in numbers:
            self.chains[number].versions.append(
                (self._content(path, self.texts[number]), self.mtimes[path])
            )

    # -- changes ---------------------------------------------------------------------

    def fresh_name(self, suffix: str | None = None, folder: str = "") -> str:
        self.counter += 1
        suffix = suffix or self.rng.choice([".md", ".txt"])
        return f"{folder}doc{self.counter}{suffix}"

    def add_document(self, path: str | None = None, paragraphs: int = 3) -> str:
        path = path or self.fresh_name()
        if path.endswith(".md"):
            self.titles[path] = " ".join(self.rng.choices(self.vocabulary, k=2)).title()
        self.docs[path] = [self._new_chain(path, self.paragraph()) for _ in range(paragraphs)]
        self._write(path)
        self._start_versions(path, self.docs[path])
        return path

    def edit(self, path: str, index: int) -> int:
        """Changes three words of one paragraph: its chain gains a version."""
        number = self.docs[path][index]
        words = self.texts[number].rstrip(".").split(" ")
        for position in self.rng.sample(range(len(words)), 3):
            words[position] = self.rng.choice(self.vocabulary)
        self.texts[number] = " ".join(words) + "."
        self._write(path)
        self._start_versions(path, [number])
        return number

    def insert(self, path: str, index: int) -> int:
        number = self._new_chain(path, self.paragraph())
        self.docs[path].insert(index, number)
        self._write(path)
        self._start_versions(path, [number])
        return number

    def remove_paragraph(self, path: str, index: int) -> None:
        number = self.docs[path].pop(index)
        self._write(path)
        self.chains[number].end = self.mtimes[path]

    def rename(self, path: str, new: str) -> None:
        """A moved file: its chains end, the new path's begin (valid from its mtime)."""
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.root / path, self.root / new)
        self._end_document(path)
        if new.endswith(".md") != path.endswith(".md"):
            raise ValueError("a rename keeps the kind of document")
        if path in self.titles:
            self.titles[new] = self.titles[path]
        self.mtimes[new] = self.mtimes.pop(path)
        self.docs[new] = [self._new_chain(new, self.texts[c]) for c in self.docs.pop(path)]
        self._start_versions(new, self.docs[new])

    def delete(self, path: str) -> None:
        (self.root / path).unlink()
        self._end_document(path)
        del self.docs[path]

    def make_binary(self, path: str) -> None:
        (self.root / path).write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary\x00")
        self._end_document(path)
        del self.docs[path]

    def add_binary(self, path: str | None = None) -> str:
        path = path or self.fresh_name(".txt")
        (self.root / path).write_bytes(bytes(range(256)) * 4)
        return path

    def ignore(self, pattern: str, *, hides: Sequence[str] = ()) -> None:
        """Adds a .gitignore line; ``hides`` are the mined documents it now covers."""
        self.ignore_lines.append(pattern)
        (self.root / ".gitignore").write_text("\n".join(self.ignore_lines) + "\n")
        for path in hides:
            self._end_document(path)
            del self.docs[path]

    def _end_document(self, path: str) -> None:
        for number in self.docs[path]:
            self.chains[number].end = RUN

    def mined(self, started: int, finished: int) -> None:
        """A mine ran in [started, finished]: the ends it was to set fall in there."""
        for chain in self.chains:
            if chain.end == RUN:
                chain.end = (started, finished)


def check(memory: erstwhile.Memory, namespace: str, source: str, folder: Folder,
          target: str, *, others: int = 0) -> list[list[Record]]:  # fmt: skip
    """Asserts that the namespace holds exactly the folder's chains (and ``others``
    records of other sources); returns the chains."""
    records = memory.service.store.origin_records(namespace, source)
    in_namespace = raw.scalar(target, "SELECT count(*) FROM records WHERE namespace = ?",
                              (namespace,))  # fmt: skip
    assert len(records) + others == in_namespace, "origin_records missed records"
    by_id = {r.id: r for r in records}
    chains: list[list[Record]] = []
    for record in records:
        if not record.supersedes:
            chain = [record]
            while chain[-1].superseded_by is not None:
                chain.append(by_id[chain[-1].superseded_by])
            chains.append(chain)
    assert sum(map(len, chains)) == len(records), "a record is outside every chain"
    actual = sorted(
        (c[0].origin.document if c[0].origin else "", tuple(r.content for r in c),
         c[-1].valid_to is not None)
        for c in chains
    )  # fmt: skip
    expected = sorted(
        (c.document, tuple(text for text, _ in c.versions), c.end is not None)
        for c in folder.chains
        if c.versions
    )
    assert actual == expected
    wanted = {(c.document, tuple(t for t, _ in c.versions)): c for c in folder.chains}
    for chain in chains:
        document = chain[0].origin.document if chain[0].origin else ""
        model = wanted[(document, tuple(r.content for r in chain))]
        for record, (_, valid_from) in zip(chain, model.versions, strict=True):
            assert record.origin is not None and record.origin.source == source
            assert record.origin.document == document == record.metadata["document"]
            assert record.kind == "document" and record.deleted_at is None
            assert record.valid_from is not None and to_us(record.valid_from) == valid_from
        for old, new in itertools.pairwise(chain):
            assert (old.superseded_by, new.supersedes) == (new.id, [old.id])
            assert old.valid_to == new.valid_from  # closed at the very instant
        last = chain[-1]
        assert last.superseded_by is None
        if isinstance(model.end, int):
            assert last.valid_to is not None and to_us(last.valid_to) == model.end
        elif isinstance(model.end, tuple):
            assert last.valid_to is not None
            assert model.end[0] <= to_us(last.valid_to) <= model.end[1]
        else:
            assert last.valid_to is None
        if len(chain) > 1:
            history = memory.history(namespace, last.id)
            assert [r.id for r in history] == [r.id for r in chain]
            assert [r.content for r in history] == [r.content for r in chain]
    return chains

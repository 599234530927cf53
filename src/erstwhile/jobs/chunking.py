"""Chunking (SPEC §9): a document's text as the chunks mining files, each one record.

Pure functions, no I/O. Chunks follow the document's own structure and stay small:

- **Markdown**: by heading, then by paragraph. A chunk never crosses a heading; its
  content starts with its heading path (``Guide > Install``), so a paragraph read on
  its own still says where it stands. Fenced code blocks stay whole (a ``#`` inside a
  fence is not a heading).
- **Code**: by top-level definition — a block that starts at column 0 after a blank
  line (a function, a class, an import block), with its decorators and comments.
  Language-agnostic and cheap; its section is the definition's name when one is found.
- **Text**: by paragraph.

Paragraphs shorter than ``min_chars`` are packed with the ones that follow them (up
to ``max_chars``), so a chunk is rarely a lone heading or a one-line list item. A
block longer than ``max_chars`` is cut into windows at line, sentence or word breaks,
each overlapping the previous one by ``overlap`` characters, so no sentence is lost at
a cut. Chunks that end at a paragraph break do not overlap: an overlap there would
make an edit of one paragraph change two chunks, and re-mining supersede both.

Each chunk carries its **section** — the heading path, or the definition's name — which
is half of its identity when a folder is mined again (see :mod:`erstwhile.jobs.mining`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath

MAX_CHARS = 1500
MIN_CHARS = 300
OVERLAP = 150
SECTION_SEPARATOR = " > "


class DocumentKind(StrEnum):
    MARKDOWN = "markdown"
    TEXT = "text"
    CODE = "code"


MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".rst", ".adoc", ".asciidoc", ".org", ".tex"})
_CODE = """
    .py .pyi .pyx .js .jsx .mjs .cjs .ts .tsx .go .rs .java .kt .kts .scala .c .h .cc .cpp
    .cxx .hpp .hh .cs .fs .rb .php .swift .m .mm .sh .bash .zsh .fish .ps1 .sql .lua .r
    .jl .hs .ml .mli .ex .exs .erl .clj .cljs .dart .vue .svelte .pl .pm .proto .graphql
    .toml .yaml .yml .ini .cfg .css .scss .html .xml .cmake .mk .nix .tf
"""
CODE_SUFFIXES = frozenset(_CODE.split())


def document_kind(path: str) -> DocumentKind | None:
    """The kind of a document from its name; ``None`` when mining does not read it.
    A name without a suffix (README, LICENSE, Makefile) is plain text."""
    name = PurePosixPath(path)
    suffix = name.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return DocumentKind.MARKDOWN
    if suffix in CODE_SUFFIXES or name.name in ("Makefile", "Dockerfile", "Justfile"):
        return DocumentKind.CODE
    if suffix in TEXT_SUFFIXES or not suffix:
        return DocumentKind.TEXT
    return None


@dataclass(frozen=True)
class Chunk:
    """One chunk: its content (a record's) and its section (heading path or
    definition name; empty when the document has none)."""

    content: str
    section: str = ""

    @property
    def digest(self) -> str:
        """The content's sha256, as :meth:`Record.content_hash` computes it."""
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()


def chunk_document(
    text: str,
    kind: DocumentKind,
    *,
    max_chars: int = MAX_CHARS,
    min_chars: int = MIN_CHARS,
    overlap: int = OVERLAP,
) -> list[Chunk]:
    """The chunks of ``text``, in document order. Empty text has none."""
    if not 0 <= overlap < max_chars // 2 or not 0 < min_chars <= max_chars:
        raise ValueError("need 0 < min_chars <= max_chars and 0 <= overlap < max_chars / 2")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == DocumentKind.MARKDOWN:
        sections = _headings_kept(_markdown_sections(text))
    elif kind == DocumentKind.CODE:
        sections = _code_sections(text)
    else:
        sections = [("", _paragraphs(text))]
    chunks: list[Chunk] = []
    for section, blocks in _merge_runs(sections):
        prefix = section + "\n\n" if section and kind == DocumentKind.MARKDOWN else ""
        room = max(max_chars - len(prefix), max_chars // 2)
        for body in _pack(blocks, room, min(min_chars, room), overlap):
            chunks.append(Chunk((prefix + body).rstrip("\n"), section))
    return chunks


def _headings_kept(sections: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """A heading with nothing under it — no text, no subsection — is a chunk of its own
    (its heading path), so no heading is lost."""
    kept = []
    for index, (section, blocks) in enumerate(sections):
        following = sections[index + 1][0] if index + 1 < len(sections) else ""
        if section and not blocks and not following.startswith(section + SECTION_SEPARATOR):
            kept.append((section, [""]))
        else:
            kept.append((section, blocks))
    return kept


def _merge_runs(sections: list[tuple[str, list[str]]]) -> Iterator[tuple[str, list[str]]]:
    """Consecutive runs of one section (code blocks of one definition) as one."""
    merged: list[tuple[str, list[str]]] = []
    for section, blocks in sections:
        if not blocks:
            continue
        if merged and merged[-1][0] == section:
            merged[-1][1].extend(blocks)
        else:
            merged.append((section, list(blocks)))
    yield from merged


# -- packing and windows -------------------------------------------------------------


def _pack(blocks: list[str], max_chars: int, min_chars: int, overlap: int) -> Iterator[str]:
    """Blocks joined by blank lines into chunks: a chunk ends once it reaches
    ``min_chars``, or before a block that would take it past ``max_chars``. A block
    over ``max_chars`` is cut into overlapping windows first."""
    pieces = [w for block in blocks for w in _windows(block, max_chars, overlap)]
    current: list[str] = []
    size = 0
    for piece in pieces:
        if current and size + 2 + len(piece) > max_chars:
            yield "\n\n".join(current)
            current, size = [], 0
        size += len(piece) + (2 if current else 0)
        current.append(piece)
        if size >= min_chars:
            yield "\n\n".join(current)
            current, size = [], 0
    if current:
        yield "\n\n".join(current)


_BREAKS = ("\n", ". ", "? ", "! ", "; ", ", ", " ")


def _windows(text: str, size: int, overlap: int) -> list[str]:
    """``text`` cut into windows of at most ``size`` characters, at the last line,
    sentence or word break in a window's second half, each starting ``overlap``
    characters before the previous one ended (at a word start)."""
    if len(text) <= size:
        return [text]
    windows = []
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = end
        for mark in _BREAKS:
            found = text.rfind(mark, start + size // 2, end)
            if found != -1:
                cut = found + len(mark)
                break
        windows.append(text[start:cut].strip())
        resume = cut - overlap
        space = text.find(" ", resume, cut)
        if overlap and space != -1:
            resume = space + 1
        start = max(resume, start + 1)
    tail = text[start:].strip()
    if tail:
        windows.append(tail)
    return [w for w in windows if w]


# -- text ----------------------------------------------------------------------------


def _paragraphs(text: str) -> list[str]:
    blocks = [block.strip("\n") for block in re.split(r"\n[ \t]*\n", text)]
    return [block.rstrip() for block in blocks if block.strip()]


# -- Markdown ------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _markdown_sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading path, paragraphs) in document order; the text before the first
    heading has the empty path."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    headings: list[tuple[int, str]] = []
    paragraph: list[str] = []
    fence: str | None = None
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":  # front matter, kept whole
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                sections[0][1].append("\n".join(lines[: end + 1]))
                lines = lines[end + 1 :]
                break

    def close() -> None:
        if paragraph and any(line.strip() for line in paragraph):
            sections[-1][1].append("\n".join(paragraph).strip("\n").rstrip())
        paragraph.clear()

    def heading(level: int, title: str) -> None:
        close()
        while headings and headings[-1][0] >= level:
            headings.pop()
        headings.append((level, title.strip() or "#" * level))
        sections.append((SECTION_SEPARATOR.join(t for _, t in headings), []))

    for line in lines:
        if fence is not None:
            paragraph.append(line)
            if line.strip().startswith(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening[1][0] * 3
            paragraph.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            heading(len(atx[1]), atx[2] or "")
        elif not line.strip():
            close()
        elif len(paragraph) == 1 and _SETEXT.match(line) and not _SETEXT.match(paragraph[0]):
            title = paragraph[0]
            paragraph.clear()
            heading(1 if line.strip()[0] == "=" else 2, title)
        else:
            paragraph.append(line)
    close()
    return sections


# -- code ----------------------------------------------------------------------------

_DEFINITION = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:public\s+|private\s+)?"
    r"(?:static\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(?:def|class|function\*?|fn|func|struct|enum|trait|impl|interface|type|module|object"
    r"|const|let|var|val|macro_rules!)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)
_CLOSING = re.compile(r"^[\]})>]")


def _code_sections(text: str) -> list[tuple[str, list[str]]]:
    """(definition name, blocks): a block starts at a line at column 0 that follows a
    blank line and does not close a bracket."""
    sections: list[tuple[str, list[str]]] = []
    block: list[str] = []
    previous_blank = True

    def close() -> None:
        while block and not block[-1].strip():
            block.pop()
        if block:
            sections.append((_definition_name(block), ["\n".join(block)]))
        block.clear()

    for line in text.split("\n"):
        starts = line[:1] not in ("", " ", "\t") and not _CLOSING.match(line)
        if starts and previous_blank and block:
            close()
        if block or line.strip():
            block.append(line)
        previous_blank = not line.strip()
    close()
    return sections


def _definition_name(block: list[str]) -> str:
    for line in block:
        found = _DEFINITION.match(line)
        if found:
            return found[1]
        if line.strip() and not line.lstrip().startswith(("@", "#", "//", "/*", "*", "--")):
            return ""  # the block's first statement is not a definition
    return ""

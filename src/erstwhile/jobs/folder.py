"""Which files of a folder mining reads (SPEC §9), and reading them.

A file is a document when it is not ignored and mining knows its kind:

- **ignored**: hidden names (``.env``, ``.git/``, ``.venv/``: never memory), what the
  folder's ``.gitignore`` files exclude (every level, with git's precedence: a deeper
  file and a later line win, ``!`` re-includes, an ignored directory is not entered),
  what an ``--exclude`` pattern matches, what no ``--include`` pattern matches (when
  some are given), and symbolic links (a mined folder's documents stay inside it);
- **unsupported**: a name whose suffix is neither Markdown, text nor code (see
  :func:`~erstwhile.jobs.chunking.document_kind`) — unless an ``--include`` pattern
  names it, when it is read as text;
- **too_large**: over ``max_bytes`` when listed (not read), or when read (it grew);
- **binary**: a NUL byte, or not UTF-8 (found when read);
- **unreadable**: gone or not readable by the time it is read;
- **not_regular**: a FIFO, a socket, a device — or a symbolic link found where the
  listing saw a file or a directory (swapped in since): never opened for reading,
  never followed (:mod:`erstwhile.jobs.files` reads every document);
- **bad_name**: a path that is not UTF-8 (the file system's names are bytes): it
  cannot be stored as ``origin.document``, so the file is left out, not the mine.

Every file left out for a reason other than ``ignored`` and ``unsupported`` is also
reported by name (:class:`Refusal`), the name shown with what is not printable UTF-8
escaped.

Patterns are gitignore-style (``*.md`` at any depth, ``docs/**``, ``/top-level``),
matched with ``pathspec``, the library the Python tooling uses for the same job.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

from erstwhile.domain.errors import InvalidInput
from erstwhile.jobs.chunking import DocumentKind, document_kind
from erstwhile.jobs.files import NOT_REGULAR, Refused, kind_of, read_under, shown, storable

DEFAULT_MAX_BYTES = 1_000_000
SKIP_REASONS = ("ignored", "unsupported", "too_large", "binary", "unreadable", NOT_REGULAR,
                "bad_name")  # fmt: skip
#: Refusals listed by name in one report at most (the counts go on past it).
MAX_REFUSALS = 1000
GITIGNORE_BYTES = 1_000_000


@dataclass(frozen=True)
class Document:
    """A file to mine: ``path`` is its POSIX path relative to the folder (its
    ``origin.document``)."""

    path: str
    file: Path
    kind: DocumentKind
    size: int
    mtime: int  # µs since the epoch
    root: Path  # the folder: ``file`` is read from it (:func:`read`)


@dataclass(frozen=True)
class Refusal:
    """A file left out, by name: ``path`` relative to the folder, as :func:`shown`
    writes it; ``reason`` one of :data:`SKIP_REASONS`; ``detail`` why, in words."""

    path: str
    reason: str
    detail: str


class Skipped:
    """What a scan and the reads after it left out: counts by reason, and the files
    refused for a reason other than ``ignored`` or ``unsupported``, by name."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter(dict.fromkeys(SKIP_REASONS, 0))
        self.refusals: list[Refusal] = []

    def count(self, reason: str, n: int = 1) -> None:
        self.counts[reason] += n

    def refuse(self, relative: str, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        if len(self.refusals) < MAX_REFUSALS:
            self.refusals.append(Refusal(shown(relative), reason, detail))


@dataclass(frozen=True)
class Text:
    content: str
    revision: str  # the first 16 hex digits of the sha256 of the file's bytes


def patterns(values: Sequence[str], field: str) -> pathspec.PathSpec | None:
    """Gitignore-style patterns as one matcher (``None`` when there are none)."""
    cleaned = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{field} patterns must be non-empty strings such as '*.md'")
        cleaned.append(value.strip())
    if not cleaned:
        return None
    try:
        import pathspec  # here, not at import: every CLI command imports this module

        return pathspec.GitIgnoreSpec.from_lines(cleaned)
    except (ValueError, TypeError) as error:
        raise InvalidInput(f"{field}: {error}") from None


class _Gitignores:
    """The ``.gitignore`` files met on the way down, deepest last."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []

    def enter(self, root: Path, relative: str) -> None:
        self._specs = [(base, s) for base, s in self._specs if _under(relative, base)]
        try:
            data, _ = read_under(root, f"{relative}/.gitignore" if relative else ".gitignore",
                                 max_bytes=GITIGNORE_BYTES)  # fmt: skip
        except (OSError, Refused):  # none, or not a plain file: nothing it could say
            return
        lines = data.decode("utf-8", errors="replace").splitlines()
        if lines:
            import pathspec

            self._specs.append((relative, pathspec.GitIgnoreSpec.from_lines(lines)))

    def ignored(self, relative: str, *, directory: bool) -> bool:
        for base, spec in reversed(self._specs):
            inner = relative[len(base) + 1 :] if base else relative
            verdict = spec.check_file(inner + "/" if directory else inner).include
            if verdict is not None:
                return verdict
        return False


def _under(relative: str, base: str) -> bool:
    return not base or relative == base or relative.startswith(base + "/")


def scan(
    root: Path,
    *,
    include: pathspec.PathSpec | None = None,
    exclude: pathspec.PathSpec | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    skipped: Skipped | None = None,
) -> Iterator[Document]:
    """The folder's documents, directory by directory in name order; ``skipped``
    counts the files left out (by reason, and the refusals by name; binary files
    excepted: those are found by :func:`read`)."""
    skipped = Skipped() if skipped is None else skipped
    gitignores = _Gitignores()
    for directory, dirnames, filenames in _walk(root):
        relative_dir = directory.relative_to(root).as_posix()
        relative_dir = "" if relative_dir == "." else relative_dir
        gitignores.enter(root, relative_dir)
        keep = []
        for name in sorted(dirnames):
            relative = f"{relative_dir}/{name}" if relative_dir else name
            hidden = name.startswith(".") or (directory / name).is_symlink()
            if (
                hidden
                or gitignores.ignored(relative, directory=True)
                or (exclude is not None and exclude.match_file(relative + "/"))
            ):
                skipped.count("ignored", _count_files(directory / name))
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            relative = f"{relative_dir}/{name}" if relative_dir else name
            document = _document(root, directory / name, relative, gitignores, include,
                                 exclude, max_bytes, skipped)  # fmt: skip
            if document is not None:
                yield document


def _walk(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk in sorted order (the caller prunes ``dirnames`` in place)."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        yield Path(directory), dirnames, filenames


def _count_files(directory: Path) -> int:
    """How many files a pruned directory holds (for the skipped count; not read)."""
    if directory.is_symlink():
        return 1
    return sum(len(files) for _, _, files in os.walk(directory, followlinks=False))


def _document(
    root: Path,
    file: Path,
    relative: str,
    gitignores: _Gitignores,
    include: pathspec.PathSpec | None,
    exclude: pathspec.PathSpec | None,
    max_bytes: int,
    skipped: Skipped,
) -> Document | None:
    included = include is not None and include.match_file(relative)
    try:
        found = file.lstat()
    except OSError as error:
        skipped.refuse(relative, "unreadable", error.strerror or str(error))
        return None
    if (
        file.name.startswith(".")
        or stat.S_ISLNK(found.st_mode)
        or gitignores.ignored(relative, directory=False)
        or (exclude is not None and exclude.match_file(relative))
        or (include is not None and not included)
    ):
        skipped.count("ignored")
        return None
    kind = document_kind(relative) or (DocumentKind.TEXT if included else None)
    if kind is None:
        skipped.count("unsupported")
        return None
    if not storable(relative):
        skipped.refuse(relative, "bad_name", "the name is not UTF-8, so it cannot be stored")
        return None
    if not stat.S_ISREG(found.st_mode):
        skipped.refuse(relative, NOT_REGULAR, kind_of(found.st_mode))
        return None
    if found.st_size > max_bytes:
        skipped.refuse(relative, "too_large", f"{found.st_size} bytes, over {max_bytes}")
        return None
    return Document(relative, file, kind, found.st_size, found.st_mtime_ns // 1000, root)


def read(document: Document, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Text | None:
    """The document's text, or ``None`` when it is binary (a NUL byte, not UTF-8).
    Read through :func:`~erstwhile.jobs.files.read_under`: raises ``Refused`` when
    it is no longer a regular file in the folder or holds more than ``max_bytes``
    bytes, ``OSError`` when it cannot be read."""
    data, _ = read_under(document.root, document.path, max_bytes=max_bytes)
    if b"\x00" in data:
        return None
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return Text(content, hashlib.sha256(data).hexdigest()[:16])

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
- **too_large**: over ``max_bytes`` (not read);
- **binary**: a NUL byte, or not UTF-8 (found when read);
- **unreadable**: gone or not readable by the time it is read.

Patterns are gitignore-style (``*.md`` at any depth, ``docs/**``, ``/top-level``),
matched with ``pathspec``, the library the Python tooling uses for the same job.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

from erstwhile.domain.errors import InvalidInput
from erstwhile.jobs.chunking import DocumentKind, document_kind

DEFAULT_MAX_BYTES = 1_000_000
SKIP_REASONS = ("ignored", "unsupported", "too_large", "binary", "unreadable")


@dataclass(frozen=True)
class Document:
    """A file to mine: ``path`` is its POSIX path relative to the folder (its
    ``origin.document``)."""

    path: str
    file: Path
    kind: DocumentKind
    size: int
    mtime: int  # µs since the epoch


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

    def enter(self, directory: Path, relative: str) -> None:
        self._specs = [(base, s) for base, s in self._specs if _under(relative, base)]
        ignore = directory / ".gitignore"
        if ignore.is_file():
            try:
                lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                return
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
    skipped: Counter[str] | None = None,
) -> Iterator[Document]:
    """The folder's documents, directory by directory in name order; ``skipped``
    counts the files left out (by reason, binary files excepted: those are found by
    :func:`read`)."""
    skipped = Counter() if skipped is None else skipped
    gitignores = _Gitignores()
    for directory, dirnames, filenames in _walk(root):
        relative_dir = directory.relative_to(root).as_posix()
        relative_dir = "" if relative_dir == "." else relative_dir
        gitignores.enter(directory, relative_dir)
        keep = []
        for name in sorted(dirnames):
            relative = f"{relative_dir}/{name}" if relative_dir else name
            hidden = name.startswith(".") or (directory / name).is_symlink()
            if (
                hidden
                or gitignores.ignored(relative, directory=True)
                or (exclude is not None and exclude.match_file(relative + "/"))
            ):
                skipped["ignored"] += _count_files(directory / name)
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            relative = f"{relative_dir}/{name}" if relative_dir else name
            document = _document(directory / name, relative, gitignores, include, exclude,
                                 max_bytes, skipped)  # fmt: skip
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
    file: Path,
    relative: str,
    gitignores: _Gitignores,
    include: pathspec.PathSpec | None,
    exclude: pathspec.PathSpec | None,
    max_bytes: int,
    skipped: Counter[str],
) -> Document | None:
    included = include is not None and include.match_file(relative)
    if (
        file.name.startswith(".")
        or file.is_symlink()
        or gitignores.ignored(relative, directory=False)
        or (exclude is not None and exclude.match_file(relative))
        or (include is not None and not included)
    ):
        skipped["ignored"] += 1
        return None
    kind = document_kind(relative) or (DocumentKind.TEXT if included else None)
    if kind is None:
        skipped["unsupported"] += 1
        return None
    try:
        stat = file.stat()
    except OSError:
        skipped["unreadable"] += 1  # vanished or unreadable between listing and reading
        return None
    if stat.st_size > max_bytes:
        skipped["too_large"] += 1
        return None
    return Document(relative, file, kind, stat.st_size, stat.st_mtime_ns // 1000)


def read(document: Document) -> Text | None:
    """The document's text, or ``None`` when it is binary (a NUL byte, not UTF-8).
    Raises ``OSError`` when it cannot be read."""
    data = document.file.read_bytes()
    if b"\x00" in data:
        return None
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return Text(content, hashlib.sha256(data).hexdigest()[:16])

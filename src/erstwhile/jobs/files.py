"""The one way a job reads a file of a folder it was pointed at (:func:`read_under`).

A folder is input a stranger may have shaped, and it can change between the moment
it is listed and the moment a file is read. So the check is made on what is actually
opened, not on what was listed:

- the path is walked from the folder one name at a time (``openat``), each directory
  opened with ``O_NOFOLLOW``: a directory or file swapped for a symbolic link after
  the listing is refused, never followed out of the folder;
- the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO cannot block the open,
  a symbolic link fails it) and checked with ``fstat`` on the descriptor: anything but
  a regular file (a FIFO, a socket, a device, a directory) is refused unread;
- the size limit counts the bytes actually read (at most ``max_bytes + 1`` are), so a
  file that grew after it was listed is refused, not stored.

A refusal is :class:`Refused` with a reason and a detail, for the caller to report by
name; a file that vanished or cannot be read raises ``OSError``. :func:`shown` is how
a file name is written in a report: its bytes, with what is not printable UTF-8
escaped (``caf\\xe9.md``), so every name can be shown and none can drive a terminal.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: Refused: not a regular file (a FIFO, a socket, a device, a directory, a symbolic link).
NOT_REGULAR = "not_regular"
#: Refused: more bytes than the limit when read.
TOO_LARGE = "too_large"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = (os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))  # fmt: skip
_DIR_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_READ = 1 << 20


class Refused(Exception):
    """A file a job will not read: ``reason`` (:data:`NOT_REGULAR`, :data:`TOO_LARGE`)
    and ``detail`` (what it is, in words)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, words in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def read_under(root: Path, relative: str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of ``root/relative`` (``/``-separated) and the opened file's status;
    :class:`Refused` unless it is a regular file, reached without a symbolic link, of
    at most ``max_bytes`` bytes when read. ``OSError`` when it is gone or unreadable."""
    *directories, name = relative.split("/")
    if os.open not in os.supports_dir_fd:  # no openat here: only the file itself is checked
        return _read_fd(_open_plain(root.joinpath(*directories, name)), max_bytes)
    folder = os.open(root, _DIR_FLAGS & ~_NOFOLLOW)  # the folder itself is the caller's choice
    try:
        for directory in directories:
            found = os.stat(directory, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISDIR(found.st_mode):  # swapped since the scan walked it
                raise Refused(NOT_REGULAR, kind_of(found.st_mode))
            inner = _open(directory, _DIR_FLAGS, folder)
            os.close(folder)
            folder = inner
        # lstat first: a device is refused without opening it (an open can have effects)
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if not stat.S_ISREG(found.st_mode):
            raise Refused(NOT_REGULAR, kind_of(found.st_mode))
        fd = _open(name, _FILE_FLAGS, folder)
    finally:
        os.close(folder)
    return _read_fd(fd, max_bytes)


def _open(name: str | Path, flags: int, dir_fd: int | None = None) -> int:
    """``os.open``, a symbolic link met (``ELOOP`` under ``O_NOFOLLOW``) and a socket
    (``ENXIO``) refused."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP or (error.errno == errno.ENOTDIR and flags == _DIR_FLAGS):
            raise Refused(NOT_REGULAR, "a symbolic link") from None  # swapped in just now
        if error.errno == errno.ENXIO:
            raise Refused(NOT_REGULAR, "a socket") from None
        raise
    return fd


def _open_plain(path: Path) -> int:
    found = os.lstat(path)
    if not stat.S_ISREG(found.st_mode):
        raise Refused(NOT_REGULAR, kind_of(found.st_mode))
    return _open(path, _FILE_FLAGS)


def _read_fd(fd: int, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """Reads an opened file: refused unless regular and within ``max_bytes``; closes it."""
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):  # swapped in between the lstat and the open
            raise Refused(NOT_REGULAR, kind_of(found.st_mode))
        parts: list[bytes] = []
        total = 0
        while total <= max_bytes:
            part = os.read(fd, min(_READ, max_bytes + 1 - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
        if total > max_bytes:
            raise Refused(TOO_LARGE, f"more than {max_bytes} bytes when read")
        return b"".join(parts), found
    finally:
        os.close(fd)


def shown(name: str) -> str:
    """A file name as a report writes it: its bytes as UTF-8, with bytes that are not
    UTF-8 (``\\xe9``) and characters that are not printable (controls such as
    ``\\x1b``, format characters such as a right-to-left override ``\\u202e``)
    escaped."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def storable(name: str) -> bool:
    """Whether a name (as the file system gave it, undecodable bytes as surrogates) can
    be stored as text: valid UTF-8."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

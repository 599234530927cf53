"""Mining a folder a stranger shaped (issue #43, items 1-4): a FIFO, a socket, a
device, names that are not UTF-8, a file or directory swapped for a symbolic link
after the scan, a file that grew past ``max_bytes`` after it. The mine finishes,
mines the ordinary files, and names each refusal; nothing from outside the folder
reaches the store.

The swap happens between the scan and the read through the public path: ``progress``
is told after each document, so the test changes the folder after the first document
is read and before the next one is (documents are read in name order)."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from tests.faults.figures import FIGURES

import erstwhile
from erstwhile.domain.errors import InvalidInput
from erstwhile.jobs.files import NOT_REGULAR, TOO_LARGE, Refused, read_under, shown
from erstwhile.jobs.folder import Skipped, scan

NS = "hostile"
SECRET = "the secret outside the folder"
# one name in each of three broken encodings, and one that is UTF-8
LATIN1 = "café.md".encode("latin-1")
SHIFT_JIS = "日本語.md".encode("shift_jis")
LONE_FF = b"\xff.md"


def byte_name(folder: Path, name: bytes) -> Path:
    return Path(os.fsdecode(os.path.join(os.fsencode(folder), name)))


@contextmanager
def listening_socket(path: Path) -> Iterator[None]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        yield


def hostile_folder(root: Path) -> Path:
    folder = root / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nAn ordinary note.\n")
    (folder / "sub" / "b.txt").write_text("Another ordinary note.\n")
    os.mkfifo(folder / "pipe.md")
    for name in (LATIN1, SHIFT_JIS, LONE_FF):
        byte_name(folder, name).write_text("mined by nobody\n")
    return folder


def contents(memory: erstwhile.Memory, folder: Path) -> list[str]:
    return sorted(r.content for r in memory.service.store.origin_records(NS, str(folder.resolve())))


def test_a_fifo_a_socket_a_device_and_broken_names_are_refused_by_name(
    memory: erstwhile.Memory, tmp_path: Path
) -> None:
    folder = hostile_folder(tmp_path)
    bad = ("bad_name", "the name is not UTF-8, so it cannot be stored")
    expected = {
        "pipe.md": (NOT_REGULAR, "a FIFO"),
        "sock.md": (NOT_REGULAR, "a socket"),
        "caf\\xe9.md": bad,
        "\\x93\\xfa\\x96{\\x8c\\xea.md": bad,  # 日本語 in Shift JIS
        "\\xff.md": bad,
    }
    if os.geteuid() == 0:
        os.mknod(folder / "tty.md", stat.S_IFCHR | 0o600, os.makedev(5, 0))  # /dev/tty's numbers
        expected["tty.md"] = (NOT_REGULAR, "a character device")
    with listening_socket(folder / "sock.md"):
        report = memory.mine(NS, folder)
    assert (report.documents, report.added) == (2, 2)
    assert contents(memory, folder) == ["Alpha\n\nAn ordinary note.", "Another ordinary note."]
    assert {r.path: (r.reason, r.detail) for r in report.refused} == expected
    assert report.skipped["bad_name"] == 3
    assert report.skipped[NOT_REGULAR] == len(expected) - 3
    (job,) = memory.service.jobs(NS)
    assert (job["state"], job["error"]) == ("done", None)
    FIGURES.add("hostile files refused", len(report.refused))
    if os.geteuid() != 0:
        pytest.skip("the device node needs root (os.mknod); the rest ran")


def test_a_file_swapped_for_a_symlink_after_the_scan_is_not_followed(
    memory: erstwhile.Memory, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text(SECRET)
    (outside / "dir" / "c.md").write_text(SECRET + " in a directory")
    folder = tmp_path / "f"
    (folder / "d").mkdir(parents=True)
    (folder / "a.md").write_text("read before the swap")
    (folder / "b.md").write_text("swapped for a link to the secret")
    (folder / "d" / "c.md").write_text("its directory swapped for a link")
    (folder / "e.md").write_text("small when scanned")

    def swap(done: int, total: int) -> None:
        if done == 1:  # a.md is read; b.md, d/c.md and e.md were scanned, not read
            (folder / "b.md").unlink()
            (folder / "b.md").symlink_to(outside / "secret.md")
            (folder / "d" / "c.md").unlink()
            (folder / "d").rmdir()
            (folder / "d").symlink_to(outside / "dir", target_is_directory=True)
            (folder / "e.md").write_text("grown " * 1000)  # 6,000 bytes against 100

    report = memory.mine(NS, folder, max_bytes=100, progress=swap)
    assert contents(memory, folder) == ["read before the swap"]
    refused = {r.path: (r.reason, r.detail) for r in report.refused}
    assert refused == {
        "b.md": (NOT_REGULAR, "a symbolic link"),
        "d/c.md": (NOT_REGULAR, "a symbolic link"),
        "e.md": (TOO_LARGE, "more than 100 bytes when read"),
    }
    assert not [text for text in contents(memory, folder) if SECRET in text]
    FIGURES.add("hostile files refused", len(refused))


def test_a_file_that_grew_is_refused_on_the_bytes_read(tmp_path: Path) -> None:
    (tmp_path / "grows.md").write_text("x" * 10)
    data, found = read_under(tmp_path, "grows.md", max_bytes=10)
    assert (data, found.st_size) == (b"x" * 10, 10)
    (tmp_path / "grows.md").write_text("x" * 11)
    with pytest.raises(Refused) as refused:
        read_under(tmp_path, "grows.md", max_bytes=10)
    assert refused.value.reason == TOO_LARGE


def test_a_fifo_swapped_in_is_refused_without_blocking(tmp_path: Path) -> None:
    """No writer ever opens this FIFO: a blocking open would never return."""
    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(Refused) as refused:
        read_under(tmp_path, "pipe.md", max_bytes=10)
    assert (refused.value.reason, refused.value.detail) == (NOT_REGULAR, "a FIFO")


NAMES = st.lists(
    st.binary(min_size=1, max_size=12).filter(
        lambda b: b"/" not in b and b"\x00" not in b and not b.startswith(b".")
    ),
    min_size=1,
    max_size=8,
    unique=True,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=NAMES)
def test_any_byte_name_is_mined_or_refused_by_its_escaped_name(names: list[bytes]) -> None:
    """Oracle: a name that decodes as UTF-8 is a document; any other is refused as
    ``bad_name``, shown as its UTF-8 with the other bytes escaped."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for name in names:
            byte_name(root, name + b".txt").write_bytes(b"text")
        skipped = Skipped()
        found = sorted(d.path for d in scan(root, skipped=skipped))
    good, bad = [], []
    for name in names:
        try:
            good.append((name + b".txt").decode("utf-8"))
        except UnicodeDecodeError:
            bad.append(name + b".txt")
    assert found == sorted(good)
    assert sorted(r.path for r in skipped.refusals) == sorted(
        shown(os.fsdecode(name)) for name in bad
    )
    assert all(r.reason == "bad_name" for r in skipped.refusals)
    assert all(r.path.isprintable() for r in skipped.refusals)


def test_a_folder_whose_own_name_is_not_utf8_is_refused_clearly(
    memory: erstwhile.Memory, tmp_path: Path
) -> None:
    folder = byte_name(tmp_path, LATIN1.removesuffix(b".md"))
    folder.mkdir()
    (folder / "a.md").write_text("a note")
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    with pytest.raises(InvalidInput) as refused:
        memory.mine(NS, folder)
    assert "caf\\xe9" in refused.value.message and "rename" in refused.value.message
    with pytest.raises(InvalidInput) as refused:  # its resolved path is the source's default
        memory.mine(NS, tmp_path / "link")
    assert "caf\\xe9" in refused.value.message and "--source" in refused.value.message
    assert memory.service.jobs(NS) == []  # refused before a job row exists
    report = memory.mine(NS, tmp_path / "link", source="cafe")
    assert (report.source, report.added) == ("cafe", 1)


def test_a_folder_reached_through_a_link_is_read(tmp_path: Path) -> None:
    """The folder itself may be a link (the caller's choice); only what is under it
    must not be."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "sub" / "a.md").write_text("under a linked folder")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    data, _ = read_under(tmp_path / "link", "sub/a.md", max_bytes=100)
    assert data == b"under a linked folder"

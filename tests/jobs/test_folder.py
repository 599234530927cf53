"""Which files a mine reads: .gitignore at every level with git's precedence, hidden
names, symbolic links, --include/--exclude, sizes and binary files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from erstwhile.jobs.folder import Skipped, patterns, read, scan


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)
    return root


def listed(root: Path, **options: object) -> tuple[list[str], Counter[str]]:
    skipped = Skipped()
    found = sorted(d.path for d in scan(root, skipped=skipped, **options))  # type: ignore[arg-type]
    return found, +skipped.counts


def test_gitignore_files_at_every_level_with_gits_precedence(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        ".gitignore": "*.log\nbuild/\n/top.md\n",
        "top.md": "ignored: anchored to the root",
        "sub/top.md": "kept: the anchor is the root's",
        "keep.md": "kept",
        "debug.log": "ignored",
        "build/out.md": "ignored with its directory",
        "sub/.gitignore": "!important.log\nlocal.md\n",
        "sub/important.log": "re-included by the deeper file",
        "sub/local.md": "ignored by the deeper file",
        "other/local.md": "kept: the deeper file is not its",
    })  # fmt: skip
    found, skipped = listed(root, include=patterns(["*"], "include"))
    assert found == ["keep.md", "other/local.md", "sub/important.log", "sub/top.md"]
    assert skipped["ignored"] == 6  # 2 .gitignore, top.md, debug.log, build/out.md, local.md


def test_hidden_names_links_unsupported_and_sizes(tmp_path: Path) -> None:
    root = tree(tmp_path / "f", {
        ".env": "SECRET=1", ".venv/lib.py": "x", "notes.md": "n", "photo.jpg": "jpg",
        "big.txt": "x" * 50, "code/tool.py": "def f():\n    pass\n",
    })  # fmt: skip
    (root / "link.md").symlink_to(root / "notes.md")
    (root / "outside").symlink_to(tmp_path, target_is_directory=True)
    found, skipped = listed(root, max_bytes=40)
    assert found == ["code/tool.py", "notes.md"]
    assert skipped == Counter({"ignored": 4, "unsupported": 1, "too_large": 1})


def test_include_and_exclude(tmp_path: Path) -> None:
    root = tree(tmp_path, {"docs/a.md": "a", "docs/b.txt": "b", "data.csv": "1,2", "c.md": "c"})
    found, _ = listed(
        root, include=patterns(["docs/", "*.csv"], "include"),
        exclude=patterns(["*.txt"], "exclude"),
    )  # fmt: skip
    assert found == ["data.csv", "docs/a.md"]  # an included file of unknown type is text


def test_binary_files_are_found_when_read(tmp_path: Path) -> None:
    root = tree(tmp_path, {"nul.txt": b"a\x00b", "latin.txt": "café".encode("latin-1"),
                           "bom.txt": "\ufeffhello".encode()})  # fmt: skip
    texts = {d.path: read(d) for d in scan(root)}
    assert texts["nul.txt"] is None and texts["latin.txt"] is None
    bom = texts["bom.txt"]
    assert bom is not None and bom.content == "hello" and len(bom.revision) == 16

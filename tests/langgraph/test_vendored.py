"""LangGraph's store test module is vendored unmodified, from the version the lock
installs (tests/langgraph/upstream/ORIGIN.md)."""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path

UPSTREAM = Path(__file__).parent / "upstream"
VERSION = "4.3.2"
SHA256 = {
    "test_store.py": "85482080747ad6de4310a60c294a0ba706653424705b3a855658073e51477bf1",
    "embed_test_utils.py": "810a06654e754cfba60346e38ec50b2f156b5a26e89229680625052d3af9e96e",
    "LICENSE": "d9bb52f2e3540d60ff50d8f0f5b6ba649b7fd346948c4c3d086c8afb120763c7",
}


def test_vendored_files_are_unmodified() -> None:
    for name, digest in SHA256.items():
        assert hashlib.sha256((UPSTREAM / name).read_bytes()).hexdigest() == digest, name


def test_vendored_from_the_installed_version() -> None:
    assert version("langgraph-checkpoint") == VERSION, (
        "the lock moved langgraph-checkpoint: re-vendor its tests (see upstream/ORIGIN.md)"
    )

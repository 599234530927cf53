"""The cyclic collector is paused only while a batch is built, and always comes back."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

import memstrata
from memstrata.gc_pause import gc_paused


def test_nested_and_concurrent_pauses_end_with_the_last() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait(5)

    with gc_paused():
        worker = threading.Thread(target=other)
        worker.start()
        assert inside.wait(5)
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's batch is still being built
    release.set()
    worker.join(5)
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_application_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_refused_batch_gives_the_collector_back(tmp_path: Path) -> None:
    with memstrata.open(str(tmp_path / "m.db"), embedder="hash", background_jobs=False) as m:
        with pytest.raises(memstrata.InvalidInput):
            m.upsert("ns", [{"id": "a", "content": "x"}, {"id": "b", "content": "y",
                            "valid_from": "2024-02-01", "valid_to": "2024-01-01"}])  # fmt: skip
        assert gc.isenabled()
        with pytest.raises(memstrata.NotFound):
            m.upsert("ns", [{"id": "c", "content": "z", "supersedes": ["missing"]}])
        assert gc.isenabled()
        m.upsert("ns", [{"id": "d", "content": "w"}])
        assert gc.isenabled()

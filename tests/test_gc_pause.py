"""The cyclic collector is left alone by an embedded store, and in a process tuned for
erstwhile (``erstwhile.tune_process``) paused only while a batch is built, and always
comes back."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import pytest

import erstwhile
from erstwhile import gc_pause
from erstwhile.gc_pause import gc_paused


@pytest.fixture
def tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses allowed as ``tune_process`` allows them, for this test only (the test
    process is a host that did not ask for them)."""
    monkeypatch.setattr(gc_pause, "_allowed", True)


def test_an_embedded_store_leaves_the_collector_on_in_every_thread(tmp_path: Path) -> None:
    """A host's thread sampling ``gc.isenabled()`` while ``open()``'s store writes
    50,000 records (no embedder) never sees the collector off."""
    assert gc.isenabled() and not gc_pause.pauses_allowed()
    samples: list[bool] = []
    writing, done = threading.Event(), threading.Event()

    def watch() -> None:
        writing.wait(10)
        while not done.is_set():
            samples.append(gc.isenabled())
            time.sleep(0.0005)  # lets the writer have Python's lock most of the time

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with erstwhile.open(str(tmp_path / "m.db"), embedder="none",
                            background_jobs=False) as m:  # fmt: skip
            writing.set()
            for start in range(0, 50_000, 1_000):
                m.upsert("ns", [{"id": f"r{i}", "content": f"note {i} of the mill"}
                                for i in range(start, start + 1_000)])  # fmt: skip
            assert m.search("ns", "mill").hits
    finally:
        done.set()
        watcher.join(10)
    assert len(samples) > 100 and all(samples)
    assert gc.isenabled()


def test_untuned_pauses_change_nothing() -> None:
    with gc_paused():
        assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.usefixtures("tuned")
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


@pytest.mark.usefixtures("tuned")
def test_a_collector_turned_off_by_the_application_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.usefixtures("tuned")
def test_a_refused_batch_gives_the_collector_back(tmp_path: Path) -> None:
    with erstwhile.open(str(tmp_path / "m.db"), embedder="hash", background_jobs=False) as m:
        with pytest.raises(erstwhile.InvalidInput):
            m.upsert("ns", [{"id": "a", "content": "x"}, {"id": "b", "content": "y",
                            "valid_from": "2024-02-01", "valid_to": "2024-01-01"}])  # fmt: skip
        assert gc.isenabled()
        with pytest.raises(erstwhile.NotFound):
            m.upsert("ns", [{"id": "c", "content": "z", "supersedes": ["missing"]}])
        assert gc.isenabled()
        m.upsert("ns", [{"id": "d", "content": "w"}])
        assert gc.isenabled()


@pytest.mark.usefixtures("tuned")
def test_a_batch_s_records_are_freed_before_the_collector_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a batch was parsed into are gone when the collector comes back, so
    its next collection never walks them (nor keeps them for a later one)."""
    from erstwhile.domain.records import RecordInput

    def live() -> int:
        return sum(type(o) is RecordInput for o in gc.get_objects())

    seen: list[int] = []
    enable = gc.enable
    with erstwhile.open(str(tmp_path / "m.db"), embedder="hash", background_jobs=False) as m:
        before = live()
        monkeypatch.setattr(gc, "enable", lambda: (seen.append(live()), enable()))
        m.upsert("ns", [{"id": f"r{i}", "content": f"note {i}", "vector": [1.0] * 256}
                        for i in range(50)])  # fmt: skip
    assert seen == [before]
    assert gc.isenabled()

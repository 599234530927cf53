"""SQLite's process-wide configuration is the host's: ``erstwhile.open`` leaves it as
it is. A process that calls ``erstwhile.tune_process()`` first (the CLI, the server)
has SQLite's memory statistics turned off where it holds nothing of SQLite's yet
(``store.sqlite.library``), and left as they are anywhere that could disturb someone.
Each case is a fresh Python process: the setting is the process's, and the test
process has long opened databases."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="erstwhile changes the setting on Linux only"
)

#: Prints SQLite's memory in use with a store open (0 where its statistics are off),
#: what a later attempt to turn them off returns, what a search of the store finds,
#: and the interpreter's switch interval after.
_PROBE = """
import ctypes, json, sqlite3, sys, threading
import _sqlite3
library = ctypes.CDLL(_sqlite3.__file__)
library.sqlite3_memory_used.restype = ctypes.c_int64
{before}
import erstwhile
from erstwhile.store.sqlite.library import memory_statistics_off
tuned = erstwhile.tune_process() if {tune} else None
memory = erstwhile.open(sys.argv[1], embedder="hash", background_jobs=False)
memory.upsert("n", [{{"id": "a", "content": "the mill by the river"}}])
found = [hit.record.id for hit in memory.search("n", "river").hits]
print(json.dumps({{"used": library.sqlite3_memory_used(), "again": memory_statistics_off(),
                  "found": found, "interval": sys.getswitchinterval(),
                  "tuned": tuned and tuned.sqlite_memory_statistics_off}}))
memory.close()
"""


def _run(tmp_path: Path, before: str = "", *, tune: bool = True) -> dict[str, object]:
    script = _PROBE.format(before=textwrap.dedent(before), tune=tune)
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.db")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_an_embedded_store_leaves_the_host_s_statistics_as_they_are(tmp_path: Path) -> None:
    result = _run(tmp_path, tune=False)
    assert result["used"] > 0  # type: ignore[operator]  # SQLite counts, as the host left it
    assert result["found"] == ["a"]


def test_the_cli_entry_tunes_its_process(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import ctypes, json, sys
        import _sqlite3
        from erstwhile import gc_pause
        from erstwhile.cli import main
        library = ctypes.CDLL(_sqlite3.__file__)
        library.sqlite3_memory_used.restype = ctypes.c_int64
        sys.argv = ["erstwhile", "--db", sys.argv[1], "--embedder", "none", "add", "the mill"]
        try:
            main()
        except SystemExit as end:
            code = end.code
        print(json.dumps({"code": code, "used": library.sqlite3_memory_used(),
                          "paused": gc_pause.pauses_allowed()}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.db")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "code": 0, "used": 0, "paused": True,
    }  # fmt: skip


def test_a_tuned_fresh_process_turns_the_statistics_off(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result["used"] == 0  # a store is open, and SQLite counts none of its memory
    assert result["tuned"] is True
    assert result["again"] is False  # once per process
    assert result["found"] == ["a"]  # the store works as ever afterwards


def test_a_process_that_already_holds_a_sqlite_connection_keeps_its_statistics(
    tmp_path: Path,
) -> None:
    result = _run(tmp_path, "held = sqlite3.connect(':memory:')")
    assert result["used"] > 0  # type: ignore[operator]
    assert result["tuned"] is False
    assert result["found"] == ["a"]


def test_another_thread_running_does_not_keep_them_on(tmp_path: Path) -> None:
    """A server's threads (an event loop, a pool) hold nothing of SQLite's: the
    statistics still go off, the switch interval is the process's again after."""
    result = _run(
        tmp_path,
        """
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        sys.setswitchinterval(0.004)
        """,
    )
    assert result["used"] == 0
    assert result["interval"] == 0.004
    assert result["found"] == ["a"]


def test_a_thread_holding_a_connection_keeps_them_on(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        opened, stop = threading.Event(), threading.Event()
        def hold():
            held = sqlite3.connect(":memory:")
            opened.set()
            stop.wait()
        threading.Thread(target=hold, daemon=True).start()
        opened.wait(10)
        """,
    )
    assert result["used"] > 0  # type: ignore[operator]
    assert result["found"] == ["a"]

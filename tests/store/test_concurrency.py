"""Several processes and threads on one store: nothing lost, no "database is locked"."""

from __future__ import annotations

import subprocess
import sys
import threading

import erstwhile

WRITER = """
import sys, erstwhile
m = erstwhile.open(sys.argv[1], embedder="hash", background_jobs=False)
for i in range(int(sys.argv[3])):
    m.upsert("ns", [{"id": f"{sys.argv[2]}-{i}", "content": f"note {i} from {sys.argv[2]}"}])
    if i % 50 == 0:
        m.search("ns", "note")
m.close()
"""


def test_two_processes_writing_one_store_lose_nothing(store_target: str) -> None:
    erstwhile.open(
        store_target, embedder="hash"
    ).close()  # create the schema first, as a server would
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store_target, name, "500"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert "locked" not in err
    with erstwhile.open(store_target, embedder="hash") as m:
        for name in ("p1", "p2"):
            for i in range(500):
                assert m.get("ns", f"{name}-{i}").version == 1
        assert len(m.service.store.ledger("ns")) == 1000


def test_threads_share_one_memory(store_target: str) -> None:
    errors: list[BaseException] = []
    with erstwhile.open(store_target, embedder="hash") as m:

        def work(name: str) -> None:
            try:
                for i in range(100):
                    m.upsert("ns", [{"id": f"{name}-{i}", "content": f"thread note {i}"}])
                    m.search("ns", "thread")
            except BaseException as error:  # collected and asserted below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(m.service.store.ledger("ns")) == 400

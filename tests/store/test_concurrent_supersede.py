"""Eight writers superseding the same keys at once: chains never fork, no write is lost.

Each writer has its own connection (its own ``Memory``) and repeatedly supersedes
the newest record of a key's chain; when another writer got there first the store
refuses with ``erstwhile.write.conflict`` and the writer re-reads the head and tries
again. Afterwards every chain must be one straight line holding exactly the
supersessions that were reported as written.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict

import erstwhile

WRITERS = 8
KEYS = ["alpha", "beta"]
ROUNDS = 10  # successful supersessions per writer


def newest(m: erstwhile.Memory, record_id: str) -> str:
    """The head of the chain through ``record_id``."""
    while True:
        successor = m.get("ns", record_id).superseded_by
        if successor is None:
            return record_id
        record_id = successor


def test_eight_writers_superseding_the_same_keys_never_fork(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        roots = {k: m.add("ns", f"{k} version zero", key=k, valid_from="2020-01-01") for k in KEYS}
    start = threading.Barrier(WRITERS)
    written: dict[str, list[str]] = defaultdict(list)  # key -> ids reported as written
    conflicts: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        try:
            with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
                heads = dict(roots)
                start.wait(timeout=60)
                for i in range(ROUNDS):
                    key = KEYS[(n + i) % len(KEYS)]
                    while True:
                        heads[key] = newest(m, heads[key])
                        try:
                            result = m.supersede(
                                "ns", heads[key], {"content": f"{key} by writer {n} round {i}"}
                            )
                        except erstwhile.WriteConflict:
                            with lock:
                                conflicts.append(n)
                            continue  # someone superseded that head first: re-read
                        with lock:
                            written[key].append(result.ids[0])
                        heads[key] = result.ids[0]
                        break
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(len(ids) for ids in written.values()) == WRITERS * ROUNDS

    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        for key in KEYS:
            chain = [roots[key]]
            while (successor := m.get("ns", chain[-1]).superseded_by) is not None:
                chain.append(successor)
            # one straight line holding exactly the writes that were reported: no fork
            # (a fork would leave a reported write off the line), no lost write
            assert sorted(chain[1:]) == sorted(written[key])
            assert len(set(chain)) == len(chain)
            records = [m.get("ns", rid) for rid in chain]
            for older, newer in itertools.pairwise(records):
                assert newer.supersedes == [older.id]
                assert older.valid_to == newer.valid_from
                assert older.version == 2  # created, then closed exactly once
                assert older.key == key and newer.key == key
            assert records[-1].version == 1 and records[-1].valid_to is None
            assert [r.id for r in m.history("ns", roots[key])] == chain
            # exactly one current holder of the key: the head
            current = m.search("ns", key, key=key, ranking="lexical", top_k=100)
            assert current.ids() == [chain[-1]]
        ledger = m.service.store.ledger("ns")
        total = WRITERS * ROUNDS
        assert sum(e.op == "close" for e in ledger) == total
        assert sum(e.op == "create" for e in ledger) == total + len(KEYS)
        everything = m.search("ns", " ".join(KEYS), include_historical=True, ranking="lexical",
                              top_k=1000)  # fmt: skip
        assert len(everything.hits) == total + len(KEYS)

"""Job rows: filtered by namespace, state and id, and the latest N, oldest first."""

from __future__ import annotations

import pytest

import erstwhile


def test_job_rows_are_filtered_in_the_store(memory: erstwhile.Memory) -> None:
    store = memory.service.store
    ids = [store.job_start("embed", f"ns{i % 2}", i, "host:1") for i in range(12)]
    for job_id in ids[:5]:
        store.job_update(job_id, state="done", done=1, error=None, now=100)
    assert [j["id"] for j in store.jobs()] == ids
    assert [j["id"] for j in store.jobs("ns0")] == ids[0::2]
    assert [j["id"] for j in store.jobs(state="running")] == ids[5:]
    assert [j["id"] for j in store.jobs("ns1", state="done")] == [ids[1], ids[3]]
    assert [j["id"] for j in store.jobs(job_id=ids[7])] == [ids[7]]
    assert store.jobs(job_id=max(ids) + 1) == []
    assert [j["id"] for j in store.jobs(last=3)] == ids[-3:]
    assert [j["id"] for j in store.jobs("ns0", last=2)] == ids[0::2][-2:]
    job = memory.service.job(ids[4])
    assert (job["state"], job["namespace"], job["owner"]) == ("done", "ns0", "host:1")


def test_an_id_beyond_64_bits_is_simply_not_found(memory: erstwhile.Memory) -> None:
    with pytest.raises(erstwhile.NotFound):
        memory.service.job(2**70)

"""``GET …/audit``'s record counts, the payload the inspector's Namespaces view reads,
through a real ``erstwhile serve`` on each backend: a record that is not yet valid is
counted as ``future``, and the five states add up to ``records``."""

from __future__ import annotations

from pathlib import Path

import erstwhile

from .harness import start_server, write_config

STATES = ("current", "future", "superseded", "invalidated", "deleted")


def test_audit_counts_future_records_and_adds_up(store_target: str, tmp_path: Path) -> None:
    ns = "team"
    with erstwhile.open(store_target, embedder="hash", background_jobs=False) as m:
        old = m.add(ns, "Alice works at Acme", valid_from="2023-01-01")
        m.supersede(ns, old, {"content": "Alice works at Globex", "valid_from": "2024-06-01"})
        moves = m.add(ns, "the team moves to Berlin", valid_from="2098-03-01")
        m.supersede(ns, moves, {"content": "the team moves to Paris", "valid_from": "2099-01-01"})
        m.add(ns, "the lease is signed", valid_from="2097-01-01", valid_to="2098-01-01")
        lead = m.add(ns, "Bob leads Apollo", valid_from="2023-03-01")
        m.invalidate(ns, lead, at="2024-02-01")
        m.add(ns, "the trial ended", valid_from="2023-01-01", valid_to="2023-02-01")
        m.delete(ns, m.add(ns, "Carol sits on floor 3", valid_from="2023-08-01"))
        m.delete(ns, m.add(ns, "a plan for 2099", valid_from="2099-01-01"))
        m.delete(ns, m.add(ns, "gone for good", valid_from="2023-01-01"), hard=True)
    server = start_server(store_target, write_config(tmp_path / "erstwhile.toml"))
    try:
        with server.http(server.token(read_only=True)[1]) as reader:
            counts = reader.get(f"/v1/namespaces/{ns}/audit").json()["records"]
            schema = reader.get("/openapi.json").json()["components"]["schemas"]
    finally:
        server.stop()
    # Berlin (superseded from 2099, so not closed yet), Paris and the lease: not yet valid
    assert counts == {"records": 9, "current": 1, "future": 3, "superseded": 1,
                      "invalidated": 2, "deleted": 2}  # fmt: skip
    assert sum(counts[state] for state in STATES) == counts["records"]
    assert set(schema["RecordCounts"]["properties"]) == {"records", *STATES}

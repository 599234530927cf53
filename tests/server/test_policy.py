"""Policy caps in the service: refuse over a cap, never truncate, at any interface."""

from __future__ import annotations

from pathlib import Path

import pytest

import erstwhile
from erstwhile.domain.search import SearchRequest
from erstwhile.service import Policy


def test_no_caps_by_default(tmp_path: Path) -> None:
    with erstwhile.open(tmp_path / "m.db", embedder="hash", background_jobs=False) as m:
        m.upsert("ns", [{"content": f"record {i}"} for i in range(1500)])
        assert len(m.search("ns", "record", top_k=1200, ranking="lexical").hits) == 1200


def test_each_cap_refuses_and_writes_nothing(tmp_path: Path) -> None:
    policy = Policy(
        max_top_k=5, max_candidate_k=20, max_records_per_upsert=3, max_content_bytes=10,
        max_max_rows=2,
    )  # fmt: skip
    with erstwhile.open(
        tmp_path / "m.db", embedder="hash", background_jobs=False, policy=policy
    ) as m:
        with pytest.raises(erstwhile.PolicyLimit, match=r"records is 4.*max_records_per_upsert"):
            m.upsert("ns", [{"content": "ok"}] * 4)
        # ten ASCII letters fit; five two-byte letters do too; a sixth does not
        m.upsert("ns", [{"content": "abcdefghij"}, {"content": "ééééé"}])
        with pytest.raises(erstwhile.PolicyLimit, match=r"records\[1\]\.content \(bytes\) is 12"):
            m.upsert("ns", [{"content": "fine"}, {"content": "éééééé"}])
        with pytest.raises(erstwhile.PolicyLimit, match="max_top_k"):
            m.search("ns", "x", top_k=6)
        with pytest.raises(erstwhile.PolicyLimit, match="max_candidate_k"):
            m.search("ns", "x", top_k=5, candidate_k=21)
        with pytest.raises(erstwhile.PolicyLimit, match="max_max_rows"):
            m.expire("ns", action="soft_delete", max_rows=3, all=True)
        created = [entry.op for entry in m.service.store.ledger("ns")]
        assert created == ["create", "create"]  # only the accepted write happened
        assert m.expire("ns", action="soft_delete", max_rows=2, all=True) == 2


def test_default_lane_depth_stays_under_the_candidate_cap() -> None:
    capped = Policy(max_candidate_k=60)
    assert capped.lane_depth(SearchRequest(query="x", top_k=5)) == 50
    assert capped.lane_depth(SearchRequest(query="x", top_k=20)) == 60  # not 100
    assert capped.lane_depth(SearchRequest(query="x", top_k=80)) == 80  # never below top_k
    assert capped.lane_depth(SearchRequest(query="x", candidate_k=40)) == 40
    assert Policy().lane_depth(SearchRequest(query="x", top_k=20)) == 100

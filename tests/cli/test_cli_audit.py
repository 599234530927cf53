"""``erstwhile audit``: a namespace's embedder, backlogs, records by state and latest
jobs, as a table or as the JSON the Python API (and REST) answer."""

from __future__ import annotations

from typing import Any

import erstwhile

from .conftest import Cli


def test_audit_shows_records_by_state_and_jobs(cli: Cli, text: Any) -> None:
    old = cli.add("the office is in Leeds")
    cli.ok("supersede", old, "the office is in York")
    gone = cli.add("the lease ends in May")
    cli.ok("invalidate", gone)
    cli.add("bin day is Tuesday")
    cli.ok("embed")

    found = cli.json("audit")
    with erstwhile.open(cli.db, embedder="hash", background_jobs=False) as memory:
        assert found == memory.audit("default")
    assert found["records"] == {"records": 4, "current": 2, "future": 0, "superseded": 1,
                                "invalidated": 1, "deleted": 0}  # fmt: skip
    assert found["embedder"].startswith("hash:") and found["backlog"] == 0
    assert [job["type"] for job in found["jobs"]] == ["embed"]
    assert found["jobs"][0]["created_at"].endswith("Z")

    shown = text(cli.ok("audit").stdout)
    for line in ("superseded 1", "invalidated 1", "current 2", "future 0", "vector backlog 0"):
        assert line in shown
    assert "embed done" in shown


def test_audit_of_an_unknown_namespace_fails_clearly(cli: Cli) -> None:
    cli.add("something")
    failed = cli.fails(1, "audit", "--namespace", "nothing-here")
    assert "namespace 'nothing-here' does not exist" in failed.output

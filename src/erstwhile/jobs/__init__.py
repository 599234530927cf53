"""Durable jobs. The database is the cursor: a job re-run after a crash picks up
exactly the work that is still missing and redoes nothing."""

from __future__ import annotations

from typing import Any

from erstwhile.domain.time import format_instant


def job_json(job: dict[str, Any]) -> dict[str, Any]:
    """A job row as JSON-ready data: instants in RFC 3339, unset error, owner, usage
    (jobs that call no provider) and stopped left out (REST, the Python API's ``audit``
    and ``erstwhile audit --json`` alike)."""
    data = {
        **job,
        "created_at": format_instant(job["created_at"]),
        "updated_at": format_instant(job["updated_at"]),
    }
    for optional in ("error", "owner", "usage", "stopped"):
        if data.get(optional) is None:
            data.pop(optional, None)
    return data

"""The ``http`` extractor end to end against a real HTTP server that answers like a
model — valid JSON with usage, invalid and truncated JSON, no usage, slow, failing —
and the figures each extract job keeps on its row (calls, retries, failures, unreadable
answers, tokens) and its budget (``max_calls``, ``max_tokens``), on both backends."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.embedding.fake_server import FakeServer
from tests.support.chat_model import Model, tokens_for

import erstwhile
from erstwhile.config import load_settings
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.extraction.http import HttpExtractor
from erstwhile.jobs import job_json


def extractor(server: FakeServer, *, timeout: float = 10.0) -> HttpExtractor:
    return HttpExtractor(model="tiny-llm", base_url=server.url + "/v1", timeout=timeout,
                         max_attempts=2, backoff_base=0.001)  # fmt: skip


@pytest.fixture
def model(server: FakeServer) -> Iterator[Model]:
    scripted = Model()
    server.respond = scripted
    yield scripted
    scripted.release.set()  # a held answer ends, so the server stops at once


def open_store(target: str, server: FakeServer, **options: Any) -> erstwhile.Memory:
    return erstwhile.open(target, embedder="none", background_jobs=False,
                          extractor=extractor(server, **options))  # fmt: skip


def add_notes(m: erstwhile.Memory, texts: list[str]) -> None:
    for i, text in enumerate(texts):
        m.add("ns", text, id=f"n{i:03d}", valid_from=f"2024-01-01T00:00:{i:02d}Z")


def the_job(m: erstwhile.Memory, job_id: int) -> dict[str, Any]:
    """The job row as REST and the CLI show it."""
    return job_json(m.service.job(job_id))


def graph(m: erstwhile.Memory) -> dict[str, Any]:
    """The namespace's graph, without the job ids provenance carries (two runs of the
    same reading differ in those only)."""

    def without_job(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if provenance is None else {k: v for k, v in provenance.items() if k != "job"}

    entities = sorted(m.entities("ns", limit=1000), key=lambda e: e.id)
    edges = m.service.store.graph.relationships("ns", None, None)
    return {
        "entities": [(e.id, e.name, e.kind, e.aliases) for e in entities],
        "edges": sorted((e.id, e.subject, e.predicate, e.object, e.valid_from, e.valid_to,
                         e.confidence, json.dumps(without_job(e.provenance), sort_keys=True))
                        for e in edges),
        "mentions": sorted((x.record, x.entity, x.spelling,
                            json.dumps(without_job(x.provenance), sort_keys=True))
                           for e in entities for x in m.mentions("ns", e.id)),
    }  # fmt: skip


def test_each_kind_of_answer_is_read_and_counted(
    store_target: str, server: FakeServer, model: Model
) -> None:
    texts = [
        "Ada works on Apollo",
        "INVALID: Grace works on Cobol",
        "PARTIAL: Linus works on Linux",
        "NOUSAGE: Guido works on Python",
        "FLAKY: Barbara works on Clu",
        "Ken works on Unix",
    ]
    with open_store(store_target, server) as m:
        add_notes(m, texts)
        report = m.extract("ns")
        job = the_job(m, report.job_id)
        names = {e.name: e.kind for e in m.entities("ns")}
    # the answers read: valid ones, the one without usage, the one retried after a 503
    assert names == {"Ada": "person", "Apollo": "project", "Guido": "person",
                     "Python": "project", "Barbara": "person", "Clu": "project",
                     "Ken": "person", "Unix": "project"}  # fmt: skip
    assert (job["state"], job["done"], report.remaining, report.stopped) == ("done", 6, 0, None)
    usage = job["usage"]
    assert usage == report.usage
    assert {k: usage[k] for k in ("calls", "retries", "failed", "unreadable")} == {
        "calls": 6, "retries": 1, "failed": 0, "unreadable": 2,
    }  # fmt: skip
    reported = [tokens_for(t) for t in texts if "NOUSAGE" not in t]
    assert usage["tokens_in"] == sum(i for i, _ in reported)
    assert usage["tokens_out"] == sum(o for _, o in reported)
    assert usage["provider_ms"] >= 0
    assert "stopped" not in job and len(server.requests) == 7  # 6 calls, 1 retry


def test_tokens_are_unknown_when_the_server_reports_no_usage(
    store_target: str, server: FakeServer, model: Model
) -> None:
    with open_store(store_target, server) as m:
        add_notes(m, ["NOUSAGE: Ada works on Apollo", "NOUSAGE: Ken works on Unix"])
        job = the_job(m, m.extract("ns").job_id)
    assert job["usage"]["calls"] == 2
    assert (job["usage"]["tokens_in"], job["usage"]["tokens_out"]) == (None, None)


def test_a_slow_provider_is_retried_then_fails_the_job(
    store_target: str, server: FakeServer, model: Model
) -> None:
    with open_store(store_target, server, timeout=0.3) as m:
        add_notes(m, ["Ada works on Apollo", "SLOW: Ken works on Unix", "Guido works on Python"])
        with pytest.raises(ProviderFailed) as failed:
            m.extract("ns")
        model.release.set()
        (job,) = [job_json(j) for j in m.service.jobs("ns")]
        backlog = m.audit("ns")["extraction_backlog"]
        names = {e.name for e in m.entities("ns")}
    assert "Timeout" in failed.value.message and job["state"] == "failed"
    assert "Timeout" in job["error"] and job["done"] == 1
    assert {k: job["usage"][k] for k in ("calls", "retries", "failed", "unreadable")} == {
        "calls": 2, "retries": 1, "failed": 1, "unreadable": 0,
    }  # fmt: skip
    assert names == {"Ada", "Apollo"} and backlog == 2  # the next job reads the rest


def test_a_rejected_request_fails_at_once(
    store_target: str, server: FakeServer, model: Model
) -> None:
    with open_store(store_target, server) as m:
        add_notes(m, ["REJECT: Ada works on Apollo", "Ken works on Unix"])
        with pytest.raises(ProviderFailed) as failed:
            m.extract("ns")
        (job,) = [job_json(j) for j in m.service.jobs("ns")]
    assert "HTTP 400" in failed.value.message and job["state"] == "failed"
    assert (job["usage"]["calls"], job["usage"]["retries"], job["usage"]["failed"]) == (1, 0, 1)
    assert len(server.requests) == 1 and job["done"] == 0


def test_max_calls_stops_cleanly_and_the_next_job_finishes(
    store_target: str, server: FakeServer, model: Model, tmp_path: Path
) -> None:
    texts = [f"P{i} works on Q{i % 3}" for i in range(5)]
    with open_store(str(tmp_path / "oracle.db"), server) as oracle:
        add_notes(oracle, texts)
        oracle.extract("ns")
        expected = graph(oracle)
    server.requests.clear()
    with open_store(store_target, server) as m:
        add_notes(m, texts)
        first = m.extract("ns", max_calls=2)
        job = the_job(m, first.job_id)
        assert (job["state"], job["done"], first.remaining) == ("done", 2, 3)
        assert job["stopped"] == first.stopped
        assert first.stopped is not None and first.stopped.startswith("budget: max_calls 2")
        assert job["usage"]["calls"] == 2 and len(server.requests) == 2
        assert {e.name for e in m.entities("ns")} == {"P0", "P1", "Q0", "Q1"}
        second = m.extract("ns")
        assert (second.extracted, second.remaining, second.stopped) == (3, 0, None)
        assert graph(m) == expected


def test_max_tokens_stops_once_the_tokens_reach_it(
    store_target: str, server: FakeServer, model: Model
) -> None:
    texts = ["Ada works on Apollo", "Ken works on Unix", "Guido works on Python"]
    first_call = sum(tokens_for(texts[0]))
    with open_store(store_target, server) as m:
        add_notes(m, texts)
        report = m.extract("ns", max_tokens=first_call + 1)  # the second call passes it
        assert report.extracted == 2 and report.remaining == 1
        assert report.stopped is not None and "max_tokens" in report.stopped
        assert report.usage is not None
        assert report.usage["tokens_in"] + report.usage["tokens_out"] > first_call + 1
        assert m.extract("ns", max_tokens=first_call).extracted == 1


def test_max_tokens_without_usage_stops_after_one_call(
    store_target: str, server: FakeServer, model: Model
) -> None:
    with open_store(store_target, server) as m:
        add_notes(m, ["NOUSAGE: Ada works on Apollo", "NOUSAGE: Ken works on Unix"])
        report = m.extract("ns", max_tokens=1000)
    assert (report.extracted, report.remaining) == (1, 1)
    assert report.stopped is not None and "reported no token usage" in report.stopped


@pytest.mark.parametrize(
    ("budget", "field"),
    [({"max_calls": 0}, "max_calls"), ({"max_tokens": -5}, "max_tokens"),
     ({"max_calls": True}, "max_calls"), ({"max_tokens": 10**13}, "max_tokens"),
     ({"max_calls": 2.5}, "max_calls")],
)  # fmt: skip
def test_a_bad_budget_is_refused_naming_the_field(
    server: FakeServer, model: Model, tmp_path: Path, budget: dict[str, Any], field: str
) -> None:
    with open_store(str(tmp_path / "m.db"), server) as m:
        add_notes(m, ["Ada works on Apollo"])
        with pytest.raises(InvalidInput) as refused:
            m.extract("ns", **budget)
        assert field in refused.value.message
        assert m.service.jobs("ns") == [] and server.requests == []
    with pytest.raises(InvalidInput) as refused:
        erstwhile.open(str(tmp_path / "c.db"), extractor={"provider": "heuristic", **budget})
    assert f"extraction.{field}" in refused.value.message


def test_a_command_extractor_reports_calls_and_failures_and_no_tokens(
    tmp_path: Path, store_target: str
) -> None:
    program = tmp_path / "model.py"
    program.write_text(
        "import json, sys\n"
        "text = json.load(sys.stdin)['text']\n"
        "if 'FAIL' in text: sys.exit(3)\n"
        "json.dump({'entities': [{'name': text.split()[0], 'kind': 'person'}]}, sys.stdout)\n"
    )
    config = {"provider": "command", "command": [sys.executable, str(program)]}
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=config) as m:  # fmt: skip
        add_notes(m, ["Ada works on Apollo", "Ken works on Unix", "FAIL here"])
        with pytest.raises(ProviderFailed):
            m.extract("ns")
        (job,) = [job_json(j) for j in m.service.jobs("ns")]
    assert (job["state"], job["done"]) == ("failed", 2)
    usage = job["usage"]
    assert (usage["calls"], usage["failed"], usage["retries"], usage["unreadable"]) == (3, 1, 0, 0)
    assert (usage["tokens_in"], usage["tokens_out"]) == (None, None)


def test_the_budget_is_read_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERSTWHILE_EXTRACTION__MAX_CALLS", "7")
    assert load_settings(None).extraction.budget().max_calls == 7
    monkeypatch.setenv("ERSTWHILE_EXTRACTION__MAX_TOKENS", "0")
    with pytest.raises(InvalidInput) as refused:
        load_settings(None)
    assert "extraction.max_tokens" in refused.value.message


def test_the_configured_budget_applies_and_a_job_may_set_its_own(tmp_path: Path) -> None:
    config = {"provider": "heuristic", "max_calls": 1}
    with erstwhile.open(str(tmp_path / "m.db"), embedder="none", background_jobs=False,
                        extractor=config) as m:  # fmt: skip
        add_notes(m, ["Ada works on Apollo", "Ken works on Unix", "Guido works on Python"])
        first = m.extract("ns")
        assert (first.extracted, first.remaining) == (1, 2)  # the heuristic counts calls too
        assert first.usage is not None and first.usage["tokens_in"] is None
        assert m.extract("ns", max_calls=5).extracted == 2


def calls_allowed(texts: list[str], max_calls: int | None, max_tokens: int | None) -> int:
    """Brute force: how many of ``texts`` (the backlog, oldest first) one job reads."""
    calls, tokens = 0, None
    for text in texts:
        if max_calls is not None and calls >= max_calls:
            break
        if max_tokens is not None and calls and (tokens is None or tokens >= max_tokens):
            break
        calls += 1
        if "NOUSAGE" not in text:
            tokens = (tokens or 0) + sum(tokens_for(text))
    return calls


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    shapes=st.lists(st.sampled_from(["ok", "ok", "INVALID", "NOUSAGE", "PARTIAL"]),
                    min_size=1, max_size=7),
    max_calls=st.none() | st.integers(1, 4),
    max_tokens=st.none() | st.integers(1, 150),
)  # fmt: skip
def test_budgeted_jobs_end_with_the_graph_of_one_unbudgeted_job(
    server: FakeServer,
    model: Model,
    shapes: list[str],
    max_calls: int | None,
    max_tokens: int | None,
) -> None:
    texts = [f"{shape}: P{i} works on Q{i % 3}" for i, shape in enumerate(shapes)]
    with tempfile.TemporaryDirectory() as folder:
        with open_store(str(Path(folder) / "oracle.db"), server) as oracle:
            add_notes(oracle, texts)
            oracle.extract("ns")
            expected = graph(oracle)
        with open_store(str(Path(folder) / "budgeted.db"), server) as m:
            add_notes(m, texts)
            left, jobs = len(texts), 0
            while left:
                report = m.extract("ns", max_calls=max_calls, max_tokens=max_tokens)
                jobs += 1
                usage = report.usage
                assert usage is not None and report.extracted == usage["calls"] >= 1
                backlog = texts[len(texts) - left :]
                assert report.extracted == calls_allowed(backlog, max_calls, max_tokens)
                assert max_calls is None or usage["calls"] <= max_calls
                if report.remaining:  # it stopped on purpose, and says which limit
                    assert report.stopped is not None and report.stopped.startswith("budget")
                else:
                    assert report.stopped is None
                assert report.remaining == left - report.extracted
                left = report.remaining
                assert jobs <= len(texts)
            assert graph(m) == expected

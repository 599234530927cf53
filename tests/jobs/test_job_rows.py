"""Every job's row ends (issue #43, item 5): hostile provider answers are read within
bounds, and whatever a job meets — an error, an interpreter error, an interrupt, the
service closing — its row says ``done``, ``failed`` or ``interrupted``, never stays
``running``. Providers are real peers: a tiny HTTP server, a real program."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.embedding.fake_server import FakeServer, running
from tests.faults.figures import FIGURES

import erstwhile
from erstwhile.domain.errors import ProviderFailed
from erstwhile.extraction.base import Extractor
from erstwhile.extraction.command import CommandExtractor
from erstwhile.extraction.http import HttpExtractor
from erstwhile.jobs.rows import JobCrashed

NS = "ns"
DEEP = 100_000
HOSTILE = {
    # an integer confidence 400 digits long: float() of it overflows
    "huge integer": '{"entities": [{"name": "Ada", "kind": "person"}, {"name": "Apollo",'
    ' "kind": "project"}], "facts": [{"subject": "Ada", "predicate": "works_on",'
    ' "object": "Apollo", "confidence": ' + "9" * 400 + "}]}",
    # nested 100,000 deep: json.loads recurses past the interpreter's limit
    "deep nesting": '{"entities": ' + "[" * DEEP + "]" * DEEP + "}",
    # a lone surrogate: valid JSON, not text any database stores
    "lone surrogate": '{"entities": [{"name": "Ada\\ud800", "kind": "person"}], "facts": []}',
}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with running() as fake:
        yield fake


def chat(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def job_states(memory: erstwhile.Memory) -> list[tuple[str, str, str | None]]:
    return [(j["type"], j["state"], j["error"]) for j in memory.service.jobs(NS)]


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_http_answer_is_nothing_found_and_the_job_ends(
    store_target: str, server: FakeServer, case: str
) -> None:
    server.respond = lambda request, n: (200, {}, chat(HOSTILE[case]))
    extractor = HttpExtractor(model="m", base_url=server.url + "/v1", max_attempts=1)
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=extractor) as memory:  # fmt: skip
        memory.add(NS, "Ada works on Apollo")
        report = memory.extract(NS)
        assert (report.extracted, report.remaining) == (1, 0)
        assert memory.entities(NS) == []
        assert job_states(memory) == [("extract", "done", None)]
    FIGURES.add("hostile provider answers survived")


def test_a_reply_nested_deep_outside_the_message_is_nothing_found(server: FakeServer) -> None:
    server.respond = lambda request, n: (200, {}, "[" * DEEP + "]" * DEEP)
    extractor = HttpExtractor(model="m", base_url=server.url + "/v1", max_attempts=1)
    found = extractor.extract("Ada works on Apollo")
    assert found.entities == () and found.facts == ()
    extractor.close()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_command_answer_fails_the_job_with_the_reason(
    store_target: str, tmp_path: Path, case: str
) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(HOSTILE[case])
    program = f"import sys; sys.stdin.read(); sys.stdout.write(open({str(answer)!r}).read())"
    extractor = CommandExtractor([sys.executable, "-c", program])
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=extractor) as memory:  # fmt: skip
        memory.add(NS, "Ada works on Apollo")
        with pytest.raises(ProviderFailed) as failed:
            memory.extract(NS)
        [(kind, state, error)] = job_states(memory)
    assert (kind, state) == ("extract", "failed")
    assert error == failed.value.message and "stdout" in error
    FIGURES.add("hostile provider answers survived")


class Raising(Extractor):
    """An in-process provider that raises what it is given."""

    provider = "raising"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _extract(self, text: str) -> Any:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [RecursionError("maximum recursion depth exceeded"), MemoryError(), OverflowError("big")],
    ids=type,
)
def test_an_interpreter_error_fails_the_job_visibly(
    store_target: str, error: BaseException
) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=Raising(error)) as memory:  # fmt: skip
        memory.add(NS, "Ada works on Apollo")
        with pytest.raises(JobCrashed) as crashed:
            memory.extract(NS)
        [(_, state, reason)] = job_states(memory)
    assert state == "failed" and reason is not None
    assert reason.startswith(type(error).__name__)
    assert crashed.value.code == "erstwhile.internal"


def test_an_interrupt_ends_the_job_interrupted(store_target: str) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=Raising(KeyboardInterrupt())) as memory:  # fmt: skip
        memory.add(NS, "Ada works on Apollo")
        with pytest.raises(KeyboardInterrupt):
            memory.extract(NS)
        [(_, state, reason)] = job_states(memory)
    assert state == "interrupted" and reason is not None and "KeyboardInterrupt" in reason


def test_a_mine_that_crashes_ends_failed(store_target: str, tmp_path: Path) -> None:
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "a.md").write_text("a note")

    def crash(done: int, total: int) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    with erstwhile.open(store_target, embedder="none", background_jobs=False) as memory:
        with pytest.raises(JobCrashed):
            memory.mine(NS, tmp_path / "f", progress=crash)
        assert job_states(memory) == [
            ("mine", "failed", "RecursionError: maximum recursion depth exceeded")
        ]


class Waiting(Extractor):
    """Blocks on its first text until released; tells when it got there."""

    provider = "waiting"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def _extract(self, text: str) -> Any:
        self.entered.set()
        self.release.wait(30)
        return {}


def test_closing_the_service_interrupts_a_running_job(store_target: str) -> None:
    extractor = Waiting()
    memory = erstwhile.open(store_target, embedder="none", background_jobs=False,
                            extractor=extractor)  # fmt: skip
    memory.add(NS, "first")
    memory.add(NS, "second")
    job_id = memory.service.start_job("extract", NS)
    assert extractor.entered.wait(30)
    closing = threading.Thread(target=memory.close)
    closing.start()
    assert memory.service._jobs.stop.wait(30)  # close asked the job to stop...
    extractor.release.set()  # ...which it sees before its next record
    closing.join(30)
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as reopened:
        (job,) = reopened.service.jobs(NS)
    assert (job["id"], job["state"], job["done"]) == (job_id, "interrupted", 1)
    assert "asked to stop" in job["error"]


def test_a_job_started_while_another_holds_its_namespace_answers_at_once(
    store_target: str,
) -> None:
    """start_job returns the new row's id without waiting for the running job."""
    extractor = Waiting()
    with erstwhile.open(store_target, embedder="none", background_jobs=False,
                        extractor=extractor) as memory:  # fmt: skip
        memory.add(NS, "first")
        first = memory.service.start_job("extract", NS)
        assert extractor.entered.wait(30)
        second = memory.service.start_job("extract", NS)  # before: blocked here for good
        states = {j["id"]: j["state"] for j in memory.service.jobs(NS)}
        assert states == {first: "running", second: "running"}
        extractor.release.set()

"""The inspector's jobs view in a real headless Chromium against a real ``erstwhile
serve``: a namespace's extract jobs with their provider figures (calls, retries,
failures, unreadable answers, tokens — unknown when the provider reported none — and
time), a job its budget stopped, and a failed one whose hostile error shows as text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from tests.embedding.fake_server import FakeServer, Received, Reply, running
from tests.server.harness import Server, start_server, write_config
from tests.support.chat_model import Model, tokens_for

import erstwhile
from erstwhile.domain.errors import ProviderFailed
from erstwhile.extraction.http import HttpExtractor

from .tour import log_in, visit

NS = "usage"
HOSTILE = "<img src=x onerror=alert(1)>"


class HostileModel(Model):
    """The scripted model, which also refuses ``REJECT`` with a body that reads as HTML."""

    def __call__(self, request: Received, number: int) -> Reply:
        if "REJECT" in request.body["messages"][1]["content"]:
            return 400, {}, HOSTILE
        return super().__call__(request, number)


@dataclass(frozen=True)
class Jobs:
    server: Server
    reader: str
    tokens: tuple[int, int]  # what the first (budgeted) job spent


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    root = tmp_path_factory.mktemp("ui-jobs")
    db = root / "jobs.db"
    texts = ["Ada works on Apollo", "INVALID: Ken works on Unix", "NOUSAGE: Guido works on Python"]
    with running() as chat:
        chat.respond = HostileModel()
        with erstwhile.open(db, embedder="none", background_jobs=False,
                            extractor=_extractor(chat)) as m:  # fmt: skip
            m.add(NS, texts[0])
            m.add(NS, texts[1])
            m.extract(NS, max_calls=1)  # stopped by its budget, one record left
            m.add(NS, texts[2])
            m.extract(NS)  # the rest: one unreadable answer, one without usage
            m.add(NS, "REJECT: Linus works on Linux")
            with pytest.raises(ProviderFailed):
                m.extract(NS)
    server = start_server(db, write_config(root / "erstwhile.toml"))
    try:
        yield Jobs(server, server.token(read_only=True, name="reader")[1], tokens_for(texts[0]))
    finally:
        server.stop()


def _extractor(chat: FakeServer) -> HttpExtractor:
    return HttpExtractor(model="tiny-llm", base_url=chat.url + "/v1", max_attempts=1)


def test_the_jobs_view_shows_each_extract_jobs_figures(
    jobs: Jobs, chromium_session: WebDriver
) -> None:
    browser = chromium_session
    browser.get(f"{jobs.server.url}/ui/#/login")
    browser.execute_script("sessionStorage.clear()")
    log_in(browser, jobs.server.url, jobs.reader)  # a read-only token sees them
    visit(browser, jobs.server.url, f"jobs/{NS}")
    headings = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#jobs thead th")]
    rows = [
        [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        for row in browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
    ]
    shown = [dict(zip(headings, row, strict=True)) for row in rows]  # newest first
    # the server embedded the notes at start: a job that calls no extractor has no figures
    assert [
        (job["type"], job["calls"], job["tokens in"]) for job in shown if job["type"] != "extract"
    ] == [("embed", "—", "—")]
    failed, rest, budgeted = [job for job in shown if job["type"] == "extract"]
    tokens_in, tokens_out = jobs.tokens
    assert (budgeted["state"], budgeted["done"], budgeted["calls"]) == ("done", "1", "1")
    assert (budgeted["tokens in"], budgeted["tokens out"]) == (str(tokens_in), str(tokens_out))
    assert budgeted["why it ended"].startswith("budget: max_calls 1 reached")
    assert (rest["calls"], rest["unreadable"], rest["failed"]) == ("2", "1", "0")
    # the unreadable answer reported its tokens, the other none: a sum of what was reported
    assert rest["tokens in"] == str(tokens_for("INVALID: Ken works on Unix")[0])
    assert (failed["state"], failed["calls"], failed["failed"]) == ("failed", "1", "1")
    assert HOSTILE in failed["why it ended"]  # shown as text, never parsed as HTML
    assert not browser.find_elements(By.CSS_SELECTOR, "#jobs img")
    assert all(row["provider time"].endswith(" s") for row in (failed, rest, budgeted))
    nav = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#nav a")]
    assert "Jobs" in nav


def test_no_usage_at_all_reads_as_unknown(tmp_path: Path, chromium_session: WebDriver) -> None:
    db = tmp_path / "m.db"
    with running() as chat:
        chat.respond = Model()
        with erstwhile.open(db, embedder="none", background_jobs=False,
                            extractor=_extractor(chat)) as m:  # fmt: skip
            m.add(NS, "NOUSAGE: Ada works on Apollo")
            m.extract(NS)
    server = start_server(db, write_config(tmp_path / "erstwhile.toml"), "--no-auth")
    try:
        visit(chromium_session, server.url, f"jobs/{NS}")
        rows = chromium_session.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
        (cells,) = [
            [td.text for td in row.find_elements(By.TAG_NAME, "td")]
            for row in rows
            if "extract" in row.text
        ]
        assert cells[8:10] == ["unknown", "unknown"]  # tokens in, out
    finally:
        server.stop()

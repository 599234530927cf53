"""The web inspector in a real headless Chromium against a real ``erstwhile serve``:
log in, search, open a record, move the "as of" cursor, hostile content, CSP, and the
token kept out of every URL and log line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from tests.server.harness import start_server, write_config

import erstwhile
from erstwhile.domain.time import format_instant

from .browser import wait
from .conftest import EXTRACTION, Inspector
from .seed import NS, XSS, seed
from .tour import idle, log_in, screenshots, search, visit


def texts(driver: WebDriver, css: str) -> list[str]:
    return [el.text for el in driver.find_elements(By.CSS_SELECTOR, css)]


def valid_at_cursor(driver: WebDriver) -> list[str]:
    return texts(driver, "#asof-current li[data-id]")


def requested_urls(driver: WebDriver) -> list[str]:
    """Every URL the page requested since the last call (Chromium's network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
            urls.append(message["params"].get("documentURL", ""))
    return urls


def test_log_in_search_and_open_a_record(inspector: Inspector, browser: WebDriver) -> None:
    log_in(browser, inspector.url, inspector.reader)
    rows = {row[0]: row for row in (r.split() for r in texts(browser, "#namespaces tbody tr"))}
    # namespace, records, current, future, superseded, invalidated, deleted, backlogs
    assert rows["team"][1:9] == ["8", "3", "1", "2", "1", "1", "0", "0"]
    assert rows["ops"][1:3] == ["1", "1"]

    visit(browser, inspector.url, f"search/{NS}")
    search(browser, "Alice works")
    first = browser.find_element(By.CSS_SELECTOR, ".hit")
    assert first.get_attribute("data-id") == inspector.seeded.globex
    assert "Alice works at Globex" in first.text and "current" in first.text
    assert "lexical" in first.text and "BM25" in first.text  # the hit's signals
    assert "Alice works at Acme" not in texts(browser, ".hit .content")  # superseded: not now

    # as of a past date, through the form's time options
    browser.find_element(By.CSS_SELECTOR, "input[name=time][value=as_of]").click()
    browser.find_element(By.ID, "f-as_of").send_keys("2023-09-01")
    search(browser, "Alice works")
    assert texts(browser, ".hit .content")[0] == "Alice works at Acme"

    browser.find_element(By.CSS_SELECTOR, ".hit .record-link").click()
    wait(browser, lambda d: d.find_elements(By.ID, "record-fields"), "no record page")
    idle(browser)
    assert browser.find_element(By.ID, "record-content").text == "Alice works at Acme"
    chain = browser.find_elements(By.CSS_SELECTOR, "#chain li.link")
    assert [li.get_attribute("data-id") for li in chain] == [
        inspector.seeded.acme,
        inspector.seeded.globex,
    ]
    assert "superseded" in chain[0].text and "current" in chain[1].text
    ops = texts(browser, "#ledger tbody tr td:nth-child(3)")
    assert ops == ["create", "close"]  # written, then closed by its successor
    assert texts(browser, "#versions tbody tr td:first-child") == ["2", "1"]


def test_the_form_sends_scope_and_time_options(inspector: Inspector, browser: WebDriver) -> None:
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"search/{NS}")
    browser.find_element(By.CSS_SELECTOR, "input[name=time][value=historical]").click()
    browser.find_element(By.ID, "f-predicates").send_keys("priority GTE 3")
    browser.find_element(By.ID, "f-filter").send_keys("team=core")
    browser.find_element(By.ID, "f-tags").send_keys("work")
    browser.find_element(By.ID, "f-top_k").send_keys("5")
    search(browser, "Alice")
    found = {el.get_attribute("data-id") for el in browser.find_elements(By.CSS_SELECTOR, ".hit")}
    assert found == {inspector.seeded.acme, inspector.seeded.globex}
    assert "superseded" in browser.find_element(By.ID, "results").text

    browser.find_element(By.CSS_SELECTOR, "input[name=time][value=between]").click()
    browser.find_element(By.ID, "f-from").send_keys("2023-02-01")
    browser.find_element(By.ID, "f-until").send_keys("2023-03-01")
    search(browser, "Alice")
    assert texts(browser, ".hit .content") == ["Alice works at Acme"]

    browser.find_element(By.ID, "f-predicates").send_keys("\npriority GTE x")
    search(browser, "Alice")  # the server's own message, naming the field
    assert "erstwhile.input.invalid" in browser.find_element(By.ID, "results").text
    assert "priority" not in browser.current_url.split("#")[0]


def test_the_form_sends_known_at(inspector: Inspector, browser: WebDriver) -> None:
    """Record time: before anything was recorded, memory knew nothing."""
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"search/{NS}")
    search(browser, "Alice")
    assert browser.find_elements(By.CSS_SELECTOR, ".hit")
    browser.find_element(By.ID, "f-known_at").send_keys("2000-01-01")
    search(browser, "Alice")
    assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []
    browser.find_element(By.ID, "f-known_at").send_keys("x")  # the server names the field
    search(browser, "Alice")
    assert "known_at" in browser.find_element(By.ID, "results").text


def test_the_cursor_changes_the_current_record(inspector: Inspector, browser: WebDriver) -> None:
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"timeline/{NS}?record={inspector.seeded.acme}")
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.bar")
    assert [bar.get_attribute("data-id") for bar in bars] == [
        inspector.seeded.acme,
        inspector.seeded.globex,
    ]
    assert "status-superseded" in (bars[0].get_attribute("class") or "")
    assert valid_at_cursor(browser) == ["Alice works at Globex"]  # the cursor starts at now

    slider = browser.find_element(By.ID, "asof-cursor")
    low, high = float(slider.get_attribute("min") or 0), float(slider.get_attribute("max") or 0)
    # a person clicks the slider a fifth of the way along: mid-2023, when Acme was true
    width = slider.size["width"]
    ActionChains(browser).move_to_element_with_offset(
        slider, int(-width * 0.3), 0
    ).click().perform()
    wait(browser, lambda d: valid_at_cursor(d) == ["Alice works at Acme"], "cursor did not move")
    instant = browser.find_element(By.ID, "asof-instant").text
    assert "2023" in instant
    assert "valid" in (bars[0].get_attribute("class") or "")
    assert low < float(slider.get_attribute("value") or 0) < high

    slider.send_keys(Keys.END)
    wait(browser, lambda d: valid_at_cursor(d) == ["Alice works at Globex"], "End did not move it")
    slider.send_keys(Keys.HOME)  # before anything was valid
    wait(browser, lambda d: valid_at_cursor(d) == [], "Home did not move it")


def test_a_query_timeline_shows_each_state_distinctly(
    inspector: Inspector, browser: WebDriver
) -> None:
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"timeline/{NS}?q=works+leads+sits+moves")
    states = {
        bar.get_attribute("data-id"): (bar.get_attribute("class") or "").split()
        for bar in browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.bar")
    }
    seeded = inspector.seeded
    assert "status-superseded" in states[seeded.acme]
    assert "status-current" in states[seeded.globex]
    assert "status-invalidated" in states[seeded.invalidated]
    assert "status-deleted" in states[seeded.deleted]
    assert any("status-future" in classes for classes in states.values())
    assert seeded.deleted not in [
        li.get_attribute("data-id")
        for li in browser.find_elements(By.CSS_SELECTOR, "#asof-current li")
    ]  # a tombstone is valid nowhere


def test_hostile_content_renders_as_text(inspector: Inspector, browser: WebDriver) -> None:
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"record/{NS}/{inspector.seeded.xss}")
    assert browser.find_element(By.ID, "record-content").text == XSS
    visit(browser, inspector.url, f"search/{NS}")
    search(browser, "script alert")
    assert XSS in texts(browser, ".hit .content")
    visit(browser, inspector.url, f"timeline/{NS}?q=script+alert")
    assert XSS in texts(browser, "svg.timeline .bar-label")
    assert browser.execute_script("return document.querySelectorAll('#main script').length") == 0
    with pytest.raises(NoAlertPresentException):
        alert = browser.switch_to.alert
        raise AssertionError(f"an alert fired: {alert.text}")


def test_verify_needs_an_admin_token(inspector: Inspector, browser: WebDriver) -> None:
    target = inspector.seeded.globex
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"record/{NS}/{target}")
    browser.find_element(By.ID, "reviewer").send_keys("rita", Keys.ENTER)
    wait(
        browser, lambda d: "erstwhile.auth.forbidden" in d.find_element(By.ID, "verify-status").text
    )

    browser.find_element(By.ID, "logout").click()
    log_in(browser, inspector.url, inspector.admin)
    visit(browser, inspector.url, f"record/{NS}/{target}")
    browser.find_element(By.ID, "reviewer").send_keys("rita", Keys.ENTER)
    wait(browser, lambda d: not d.find_elements(By.ID, "verify"), "verify did not re-render")
    idle(browser)
    assert "verified" in browser.find_element(By.ID, "record-fields").text
    assert texts(browser, "#ledger tbody tr td:nth-child(3)")[-1] == "verify"


def test_entity_page_shows_relationships_over_time(
    inspector: Inspector, browser: WebDriver
) -> None:
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"entities/{NS}")
    browser.find_element(By.LINK_TEXT, "Ada").click()
    wait(browser, lambda d: d.find_elements(By.ID, "relationships"))
    idle(browser)
    labels = texts(browser, "svg.timeline .bar-label")
    assert {"Ada works_on Apollo", "Ada works_on Hermes", "Ada mentors Grace"} <= set(labels)
    assert valid_at_cursor(browser) and "Ada works_on Apollo" not in valid_at_cursor(browser)
    browser.find_element(By.ID, "asof-cursor").send_keys(Keys.HOME)
    wait(browser, lambda d: valid_at_cursor(d) == [], "Home did not move the cursor")


def test_the_login_page_refuses_a_bad_token(inspector: Inspector, browser: WebDriver) -> None:
    browser.get(f"{inspector.url}/ui/")
    wait(browser, lambda d: d.find_element(By.ID, "token")).send_keys("mst_wrong", Keys.ENTER)
    wait(
        browser,
        lambda d: "erstwhile.auth.unauthenticated" in d.find_element(By.ID, "login-status").text,
    )
    assert browser.execute_script("return sessionStorage.length") == 0


def test_csp_and_the_token_stays_out_of_urls_and_logs(
    inspector: Inspector, browser: WebDriver, shots: Path
) -> None:
    for path in ("/ui", "/ui/", "/ui/app.js", "/ui/views/search.js", "/ui/style.css", "/ui/nope"):
        answer = httpx.get(inspector.url + path, follow_redirects=False)
        policy = answer.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "default-src 'none'" in policy, path
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" not in httpx.get(inspector.url + "/healthz").headers

    # a walk through every view (its screenshots are the ones docs/img keeps)
    browser.get_log("performance")
    made = screenshots(browser, inspector.url, inspector.reader, inspector.seeded, shots)
    assert [p.name for p in made] == [
        f"ui-{view}.png"
        for view in ("login", "namespaces", "search", "record", "timeline", "entity")
    ]
    assert all(p.read_bytes().startswith(b"\x89PNG") and p.stat().st_size > 10_000 for p in made)
    urls = requested_urls(browser)
    assert any("/v1/namespaces/team/search" in url for url in urls)
    assert not [url for url in urls if inspector.reader in url]
    assert inspector.reader not in browser.current_url
    assert browser.execute_script("return document.cookie") == ""
    assert not [line for line in inspector.server.lines if inspector.reader in line]
    assert not [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]


@pytest.mark.parametrize("fragment", ["%", "search/%E0%A4%A", "record/team/%zz"])
def test_a_malformed_route_says_so_and_replaces_the_view(
    inspector: Inspector, browser: WebDriver, fragment: str
) -> None:
    """A fragment that is not valid percent-encoding (issue #43, item 11): an error in
    place of the previous view, and no uncaught URIError."""
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"search/{NS}")
    browser.get_log("browser")
    browser.execute_script("location.hash = arguments[0]", f"#/{fragment}")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#main .error"), "no error shown")
    idle(browser)
    shown = browser.find_element(By.CSS_SELECTOR, "#main").text
    assert "erstwhile.input.invalid" in shown and "not a route" in shown
    assert not browser.find_elements(By.CSS_SELECTOR, "#main form")  # the search view is gone
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


STATES = ["current", "future", "superseded", "invalidated", "deleted"]
VERIFIED_ONLY = 'default_view = "verified"\n'  # under [policy]: reads show verified records


def test_a_namespaces_states_add_up_to_its_records(
    inspector: Inspector, browser: WebDriver
) -> None:
    """A record not yet valid is counted (as future): each namespace's states add up
    to its records, and each column is what the REST payload says (issue #42)."""
    log_in(browser, inspector.url, inspector.reader)
    headings = texts(browser, "#namespaces thead th")
    assert headings[1:7] == ["records", *STATES]
    shown = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#namespaces tbody tr"):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        shown[cells[0]] = dict(zip(headings[1:7], map(int, cells[1:7]), strict=True))
    headers = {"Authorization": f"Bearer {inspector.reader}"}
    with httpx.Client(base_url=inspector.url, headers=headers) as api:
        for ns, counts in shown.items():
            assert counts == api.get(f"/v1/namespaces/{ns}/audit").json()["records"]
            assert sum(counts[state] for state in STATES) == counts["records"], ns
    assert shown[NS]["future"] == 1  # the move to Berlin, valid from 90 days on
    note = browser.find_element(By.ID, "states-note").text
    assert "future (not yet valid)" in note and note.endswith("= records.")


def test_unset_time_fields_are_empty_and_say_what_is_used(
    inspector: Inspector, browser: WebDriver
) -> None:
    """No field of the search form holds a placeholder that reads as a value: an unset
    instant or number is empty, its placeholder a format or an example, and the hint
    under it says what is used instead; the results say which time was asked (#42)."""
    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"search/{NS}")
    hints = {
        "as_of": "empty: now",
        "from": "needed for between",
        "until": "needed for between",
        "known_at": "record time, as memory knew it then; empty: now",
        "top_k": "empty: 10",
        "hops": "empty: 1",
        "limit": "empty: 10",
    }
    for name, hint in hints.items():
        box = browser.find_element(By.ID, f"f-{name}")
        assert box.get_attribute("value") == "", name
        placeholder = box.get_attribute("placeholder") or ""
        assert not re.search(r"\d", placeholder), (name, placeholder)  # no date, no number
        assert browser.find_element(By.ID, f"f-{name}-hint").text == hint
        assert box.get_attribute("aria-describedby") == f"f-{name}-hint"
    for example in browser.find_elements(By.CSS_SELECTOR, "#search-form [placeholder]"):
        placeholder = example.get_attribute("placeholder") or ""
        assert not re.search(r"\d", placeholder) or placeholder.startswith("e.g. "), placeholder
    assert "An empty field is unset" in browser.find_element(By.ID, "search-form").text

    # "as of" with its instant left empty asks about now, and the results say so
    browser.find_element(By.CSS_SELECTOR, "input[name=time][value=as_of]").click()
    search(browser, "Alice works")
    assert texts(browser, ".hit .content")[0] == "Alice works at Globex"
    assert " · now · " in browser.find_element(By.CSS_SELECTOR, "#results .summary").text
    browser.find_element(By.ID, "f-as_of").send_keys("2023-09-01")
    search(browser, "Alice works")
    assert texts(browser, ".hit .content")[0] == "Alice works at Acme"
    assert "as of 2023-09-01" in browser.find_element(By.CSS_SELECTOR, "#results .summary").text

    # between with one end given: the server names the missing one
    browser.find_element(By.CSS_SELECTOR, "input[name=time][value=between]").click()
    browser.find_element(By.ID, "f-from").send_keys("2023-01-01")
    search(browser, "Alice works")
    assert "until is missing" in browser.find_element(By.ID, "results").text


def test_mentioned_by_shows_what_each_record_says(inspector: Inspector, browser: WebDriver) -> None:
    """An entity's "Mentioned by" names each record by its content (and key), linked to
    its page, with its id beside it; hostile content stays text (issue #42)."""
    headers = {"Authorization": f"Bearer {inspector.reader}"}
    with httpx.Client(base_url=f"{inspector.url}/v1/namespaces/{NS}", headers=headers) as api:
        mentions = api.get(f"/entities/{inspector.seeded.ada}/mentions").json()["mentions"]
        records = {m["record"]: api.get(f"/records/{m['record']}").json() for m in mentions}
    assert inspector.seeded.xss in records and len(records) == 3  # two notes, one hostile

    log_in(browser, inspector.url, inspector.reader)
    visit(browser, inspector.url, f"entity/{NS}/{inspector.seeded.ada}")
    labels = browser.find_elements(By.CSS_SELECTOR, "#mentions tbody .record-label")
    assert sorted(label.get_attribute("data-id") for label in labels) == sorted(records)
    for label in labels:
        record = records[label.get_attribute("data-id") or ""]
        link = label.find_element(By.CSS_SELECTOR, "a.record-link")
        assert link.text == record["content"]
        assert link.get_attribute("title") == record["id"]
        assert (link.get_attribute("href") or "").endswith(f"#/record/{NS}/{record['id']}")
        assert label.find_element(By.CSS_SELECTOR, ".record-id").text == record["id"]
        keys = [k.text for k in label.find_elements(By.CSS_SELECTOR, ".record-key")]
        assert keys == ([record["key"]] if "key" in record else [])
    states = texts(browser, "#mentions tbody tr td:nth-child(2) .badge")
    assert sorted(states) == ["current", "current", "superseded"]  # the revised note
    # the relationships' sources are named the same way
    sources = texts(browser, "#relationships .record-label a.record-link")
    assert sources and set(sources) <= {r["content"] for r in records.values()}
    assert browser.execute_script("return document.querySelectorAll('#main script').length") == 0
    with pytest.raises(NoAlertPresentException):
        alert = browser.switch_to.alert
        raise AssertionError(f"an alert fired: {alert.text}")

    hostile = browser.find_element(
        By.CSS_SELECTOR, f"#mentions .record-label[data-id='{inspector.seeded.xss}'] a"
    )
    assert hostile.text == XSS
    hostile.click()
    wait(browser, lambda d: d.find_elements(By.ID, "record-content"), "no record page")
    idle(browser)
    assert browser.find_element(By.ID, "record-content").text == XSS


def test_mentioned_by_keeps_to_the_tokens_trust_view(
    chromium_session: WebDriver, tmp_path: Path
) -> None:
    """A record the token's trust view hides is listed by its id alone: the mentions
    listing names ids, and the labels are read through the view (issue #42)."""
    db = tmp_path / "verified-only.db"
    seeded = seed(db)
    with erstwhile.open(db, embedder="hash", background_jobs=False) as m:
        m.verify(NS, seeded.xss, "rita")  # the one mentioning record the view shows
    config = write_config(tmp_path / "erstwhile.toml", extra=VERIFIED_ONLY + EXTRACTION)
    server = start_server(db, config)
    try:
        log_in(chromium_session, server.url, server.token(read_only=True)[1])
        visit(chromium_session, server.url, f"entity/{NS}/{seeded.ada}")
        rows = chromium_session.find_elements(By.CSS_SELECTOR, "#mentions tbody tr")
        assert len(rows) == 3
        labelled = texts(chromium_session, "#mentions .record-label a.record-link")
        assert labelled == [XSS]
        hidden = [row.text for row in rows if not row.find_elements(By.CLASS_NAME, "record-label")]
        assert len(hidden) == 2
        assert all("not readable with this token" in text for text in hidden)
        assert all("Ada works on" not in text for text in hidden)
    finally:
        server.stop()


SECOND = 1_000  # ms
INSTANT = st.integers(-50, 50).map(lambda k: 1_800_000_000_000 + k * SECOND)
RECORD = st.fixed_dictionaries(
    {
        "from": INSTANT,
        "length": st.none() | st.integers(1, 60),  # seconds of validity; none: open
        "successor": st.booleans(),
        "deleted": st.booleans(),
    }
)


def rfc3339(ms: int) -> str:
    return format_instant(ms * 1000)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(plans=st.lists(RECORD, min_size=1, max_size=12), now=INSTANT)
def test_a_records_badge_is_the_state_the_audit_counts_it_in(
    browser: WebDriver, plans: list[dict[str, Any]], now: int
) -> None:
    """The badge the inspector gives a record (records.js ``status``) is the one state
    ``GET …/audit`` counts it in at that instant: a record whose successor takes over
    later is current (or future) until then, not superseded (issue #42)."""
    records, expected = [], []
    for i, plan in enumerate(plans):
        start, length = plan["from"], plan["length"]
        end = None if length is None else start + length * SECOND
        record: dict[str, Any] = {"id": f"r{i}", "valid_from": rfc3339(start)}
        if end is not None:
            record["valid_to"] = rfc3339(end)
        if plan["successor"] and end is not None:  # a successor closes it at its end
            record["superseded_by"] = f"s{i}"
        if plan["deleted"]:
            record["deleted_at"] = rfc3339(now)
        records.append(record)
        closed = end is not None and end <= now
        expected.append(
            "deleted" if plan["deleted"]
            else ("superseded" if "superseded_by" in record else "invalidated") if closed
            else "future" if start > now
            else "current"
        )  # fmt: skip
    shown = browser.execute_async_script(
        "const [records, now, done] = arguments;"
        "import('/ui/records.js').then((m) => done(records.map((r) => m.status(r, now))),"
        " (error) => done(String(error)));",
        records,
        now,
    )
    assert shown == expected

"""The inspector, driven as a person would: log in, then each view. The tests walk it
with assertions; ``scripts/ui_screenshots.py`` walks it to refresh docs/img/."""

from __future__ import annotations

import base64
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import wait
from .seed import NS, Seeded


def idle(driver: WebDriver) -> None:
    """Waits until the current view has finished loading."""
    wait(
        driver,
        lambda d: d.execute_script(
            "const v = document.querySelector('#main .view, #login');"
            "return v && v.getAttribute('aria-busy') !== 'true';"
        ),
        "the view did not finish loading",
    )


def visit(driver: WebDriver, base: str, route: str) -> None:
    driver.get(f"{base}/ui/#/{route}")
    idle(driver)


def log_in(driver: WebDriver, base: str, secret: str) -> None:
    driver.get(f"{base}/ui/")
    box = wait(driver, lambda d: d.find_element(By.ID, "token"), "no login form")
    box.send_keys(secret, Keys.ENTER)
    wait(driver, lambda d: d.find_elements(By.ID, "namespaces"), "no namespaces after login")
    idle(driver)


def search(driver: WebDriver, query: str) -> None:
    box = driver.find_element(By.ID, "f-q")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.ID, "search-submit").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .summary, #results .error"))
    idle(driver)


def screenshots(driver: WebDriver, base: str, secret: str, seeded: Seeded, out: Path) -> list[Path]:
    """One screenshot per view, written to ``out``; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def shot(name: str) -> None:
        path = out / f"ui-{name}.png"
        # the whole page, not only the window (Chromium's own full-page capture)
        size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 2400)}
        png = driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1}},
        )
        path.write_bytes(base64.b64decode(png["data"]))
        shots.append(path)

    driver.get(f"{base}/ui/#/login")
    wait(driver, lambda d: d.find_element(By.ID, "token"))
    shot("login")
    log_in(driver, base, secret)
    shot("namespaces")
    visit(driver, base, f"search/{NS}")
    search(driver, "Alice works")
    shot("search")
    visit(driver, base, f"record/{NS}/{seeded.acme}")
    shot("record")
    visit(driver, base, f"timeline/{NS}?q=works+on+at+leads+sits+moves&time=historical")
    shot("timeline")
    visit(driver, base, f"entity/{NS}/{seeded.ada}")
    shot("entity")
    return shots

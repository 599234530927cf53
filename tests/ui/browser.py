"""Debian's headless Chromium under Selenium, with the driver and browser given by path
so Selenium Manager never looks anything up or downloads anything."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = (
    None
    if CHROMIUM and CHROMEDRIVER
    else "chromium or chromedriver is missing: apt-get install chromium chromium-driver "
    "(.ci/run installs them on CI)"
)
WAIT_SECONDS = 30


def chromium(width: int = 1280, height: int = 900) -> WebDriver:
    assert CHROMIUM and CHROMEDRIVER, MISSING
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--no-pings",
        "--no-default-browser-check",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    # every request the page makes, to show the token is in none of their URLs
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return webdriver.Chrome(options=options, service=DriverService(executable_path=CHROMEDRIVER))


def wait(driver: WebDriver, until: Callable[[WebDriver], Any], message: str = "") -> Any:
    return WebDriverWait(driver, WAIT_SECONDS).until(until, message)

"""One real ``erstwhile serve`` over the seeded database and one headless Chromium for
the inspector tests. Without chromium the tests skip here, saying so; on CI (where
.ci/run installs it) a missing browser is a failure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from tests.server.harness import Server, start_server, write_config
from tests.support.pg import on_ci

from .browser import MISSING, chromium
from .seed import Seeded, seed

EXTRACTION = '\n[extraction]\nprovider = "heuristic"\n'


@dataclass(frozen=True)
class Inspector:
    server: Server
    seeded: Seeded
    reader: str  # a read-only token's secret
    admin: str

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    root = tmp_path_factory.mktemp("ui")
    db = root / "inspector.db"
    seeded = seed(db)
    server = start_server(db, write_config(root / "erstwhile.toml", extra=EXTRACTION))
    try:
        yield Inspector(
            server,
            seeded,
            reader=server.token(read_only=True, name="reader")[1],
            admin=server.token(admin=True, name="admin")[1],
        )
    finally:
        server.stop()


@pytest.fixture(scope="module")
def chromium_session() -> Iterator[WebDriver]:
    if MISSING:
        if on_ci():
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium_session: WebDriver, inspector: Inspector) -> WebDriver:
    """The module's browser, logged out, on a blank inspector page, its logs drained."""
    chromium_session.get(f"{inspector.url}/ui/#/login")
    chromium_session.execute_script("sessionStorage.clear()")
    chromium_session.get_log("performance")
    chromium_session.get_log("browser")
    return chromium_session


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path / "img"

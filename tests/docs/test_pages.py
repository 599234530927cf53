"""Every code block of README.md and docs/*.md runs (or is marked why not), in order, in
a fresh directory and store of its page; see tests/docs/README.md for the markers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docs.runner import Page, close_all, page_env, parse, run_block
from tests.server.harness import Server, start_server

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def run_page(path: Path, workdir: Path) -> Page:
    """Runs every block of the page at ``path`` in ``workdir``; raises DocError naming the
    first block that fails (or that the page leaves unclassified)."""
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    blocks = parse(path.read_text(), name)
    page = Page(name, workdir, page_env(workdir, workdir / ".bin"))
    try:
        for block in blocks:
            if block.directive == "server" and page.server is None:
                page.server = serve(page)
            run_block(page, block)
    finally:
        close_all(page)
        if isinstance(page.server, Server):
            page.server.stop()
    return page


def serve(page: Page) -> Server:
    """A real ``erstwhile serve`` on a free port, with a store of its own and an admin
    token, named to the page's blocks as ERSTWHILE_URL and ERSTWHILE_TOKEN."""
    server = start_server(page.workdir / "server.db", None, env=dict(page.env))
    _, secret = server.token(admin=True, name="docs")
    page.env["ERSTWHILE_URL"] = server.url
    page.env["ERSTWHILE_TOKEN"] = secret
    return server


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "page"
    work.mkdir()
    yield work


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_page_runs(path: Path, workdir: Path) -> None:
    run_page(path, workdir)

"""The documents shipped with erstwhile stand on their own: every file they link to is
in the repository, they cite no outside document, and the license they name is there.
The README fits on a screen or two and leads to every page of docs/, and each page
says first what a user can do with it. (tests/docs runs their code blocks.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = [
    ROOT / "README.md",
    *PAGES,
    ROOT / "bench" / "README.md",
    ROOT / "bench" / "results" / "history.md",
]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_linked_file_is_in_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if "://" in target:
            continue
        assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_document_outside_the_repository_is_cited(doc: Path) -> None:
    assert not re.search(r"\bSPEC\b", doc.read_text()), f"{doc.name} cites a SPEC"


def test_the_license_file_is_the_license_pyproject_names() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_readme_fits_on_a_screen_or_two() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference into docs/"


def test_the_readme_leads_to_every_page_of_the_docs() -> None:
    linked = set(LINK.findall((ROOT / "README.md").read_text()))
    missing = [page.name for page in PAGES if f"docs/{page.name}" not in linked]
    assert not missing, f"README.md links to no {missing}: add them to its table of interfaces"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_each_page_says_first_what_a_user_can_do_with_it(page: Path) -> None:
    first = page.read_text().split("\n\n")[1]  # the paragraph after the title
    assert first.startswith("Use this page to"), f"{page.name} opens with {first[:60]!r}"

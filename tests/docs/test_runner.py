"""The doc runner itself: a page whose block breaks fails, a block it cannot classify is
refused, a skip needs its reason, and what a page's blocks share (globals, directory,
store) is what the docs promise."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.docs.runner import DocError, parse
from tests.docs.test_pages import PAGES, ROOT, run_page

FENCE = "```"


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    (tmp_path / "work").mkdir(exist_ok=True)
    return path


def run(tmp_path: Path, text: str) -> None:
    run_page(page(tmp_path, text), tmp_path / "work")


def block(lang: str, code: str, marker: str = "") -> str:
    return f"{marker}\n{FENCE}{lang}\n{code}\n{FENCE}\n\nSome prose.\n\n"


def test_a_page_that_runs_passes(tmp_path: Path) -> None:
    run(tmp_path, block("python", "x = 1") + block("python", "assert x == 1"))


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ("raise ValueError('boom')", "ValueError('boom')"),
        ("assert 1 + 1 == 3", "assert 1 + 1 == 3"),
        ("undefined_name", "NameError"),
        ("def f(:", "SyntaxError"),
    ],
)
def test_a_broken_python_block_fails_naming_its_line(
    tmp_path: Path, broken: str, says: str
) -> None:
    text = "# A page\n\n" + block("python", "x = 1") + block("python", f"y = 2\n{broken}")
    with pytest.raises(DocError, match=r"page\.md:") as failure:
        run(tmp_path, text)
    assert says in str(failure.value)
    if "SyntaxError" not in says:  # the page's own line is named
        assert f"page.md:{text.splitlines().index(broken) + 1}" in str(failure.value)


def test_a_failing_shell_block_fails(tmp_path: Path) -> None:
    with pytest.raises(DocError, match="exit 3"):
        run(tmp_path, block("bash", "true\nexit 3\necho never"))


def test_a_console_error_is_expected_when_shown_and_refused_otherwise(tmp_path: Path) -> None:
    shown = "$ erstwhile --db missing.db search car\nerror: erstwhile.not_found: …"
    run(tmp_path, block("console", shown))
    with pytest.raises(DocError, match=r"erstwhile\.not_found"):
        run(tmp_path, block("console", "$ erstwhile --db missing.db search car"))
    wrong = "$ erstwhile --db missing.db search car\nerror: erstwhile.input.invalid: …"
    with pytest.raises(DocError, match=r"expected error erstwhile\.input\.invalid"):
        run(tmp_path, block("console", wrong))


def test_blocks_share_a_directory_a_store_and_the_erstwhile_of_this_tree(tmp_path: Path) -> None:
    text = block(
        "bash", 'echo hello > note.txt\nerstwhile --embedder none add "from the shell" --id s'
    ) + block(
        "python",
        "import erstwhile, os, pathlib\n"
        "assert pathlib.Path('note.txt').read_text() == 'hello\\n'\n"
        "m = erstwhile.open(os.environ['ERSTWHILE_DB'], embedder='none')\n"
        "assert m.get('default', 's').content == 'from the shell'\n"
        "m.close()",
    )
    run(tmp_path, text)
    assert (tmp_path / "work" / "memory.db").exists()  # the store is the page's own


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (block("", "some text"), "cannot classify a ```(no language) block"),
        (block("sql", "SELECT 1;"), "cannot classify a ```sql block"),
        (block("python", "x = 1", "<!-- doc-test: skip -->"), "needs its reason"),
        (block("python", "x = 1", "<!-- doc-test: maybe — why -->"), "unknown doc-test marker"),
        (block("json", "{}", "<!-- doc-test: server -->"), "server block must be"),
        ("<!-- doc-test: skip — why -->\n\nprose, then\n" + block("python", "x"), "right before"),
        ("text\n<!-- doc-test: skip — why -->\n", "no block after it"),
        (f"{FENCE}python\nx = 1\n", "never closed"),
        (
            block("bash", "erstwhile token create\nerstwhile --db x.db serve --port 1"),
            "starts a server",
        ),
        (block("console", "$ erstwhile mcp --namespace me"), "starts a server"),
    ],
)
def test_what_the_runner_cannot_classify_is_refused(text: str, says: str) -> None:
    with pytest.raises(DocError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse(text, "page.md")


def test_a_marked_block_is_not_run_and_data_blocks_are_parsed(tmp_path: Path) -> None:
    skipped = block("python", "raise SystemExit('never run')", "<!-- doc-test: skip — a demo -->")
    run(tmp_path, skipped + block("text", "anything at all") + block("json", '{"a": 1}'))
    with pytest.raises(DocError, match="json block failed"):
        run(tmp_path, block("json", '{"a": 1,}'))
    with pytest.raises(DocError, match="toml block failed"):
        run(tmp_path, block("toml", "[server]\nprot = 1"))  # erstwhile's settings, misspelt


def test_a_server_block_gets_a_real_server(tmp_path: Path) -> None:
    code = (
        "import os, erstwhile\n"
        "url, token = os.environ['ERSTWHILE_URL'], os.environ['ERSTWHILE_TOKEN']\n"
        "with erstwhile.Client(url, token=token) as c:\n"
        "    c.add('n', 'served', id='r')\n"
        "    assert c.get('n', 'r').content == 'served'"
    )
    shell = (
        'curl -sf "$ERSTWHILE_URL/v1/namespaces/n/records/r"'
        ' -H "Authorization: Bearer $ERSTWHILE_TOKEN"'
    )
    marker = "<!-- doc-test: server -->"
    run(tmp_path, block("python", code, marker) + block("bash", shell, marker))


def test_every_page_of_the_docs_is_classified() -> None:
    """A cheap guard beside the runs: every page parses under the convention."""
    assert ROOT / "README.md" in PAGES
    for path in PAGES:
        parse(path.read_text(), path.name)

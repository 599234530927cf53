"""Runs the fenced code blocks of a Markdown page, so a snippet that breaks fails CI.

How a block is treated follows from its language and from an optional marker, an HTML
comment on the line before its fence (``tests/docs/README.md`` is the guide):

- ``python``: run, blocks of one page in order, in one namespace of globals;
- ``bash``/``sh``/``console``: run with bash in the page's working directory
  (``console``: each ``$ `` line is a command, the lines after it its output; an output
  that begins ``error: CODE:`` expects the command to fail with that code);
- ``json``/``toml``: parsed (a ``toml`` block of erstwhile's own tables is read as
  erstwhile's settings);
- ``text``: shown, never run;
- ``<!-- doc-test: skip — REASON -->``: not run, the reason is required;
- ``<!-- doc-test: server -->``: run with a real ``erstwhile serve`` of the page
  (started once, at the page's first such block), its address and an admin token in
  ``ERSTWHILE_URL`` and ``ERSTWHILE_TOKEN``.

Any other block (no language, another language, an unknown marker) is refused: the
runner never guesses whether a block runs.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import re
import shlex
import subprocess
import sys
import tomllib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell"}
CONSOLE = {"console"}
DATA = {"json", "toml"}
SHOWN = {"text"}
DIRECTIVES = {"skip", "server"}
BLOCK_SECONDS = 180

MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
# a command that serves until stopped: it can only run as a fixture, never as a block
SERVES = re.compile(r"^[$\s]*erstwhile\b[^#\n]*?\s(serve|mcp)\b", re.MULTILINE)
ERROR_LINE = re.compile(r"^error: (?P<code>erstwhile\.[a-z_.]+):")


class DocError(AssertionError):
    """A page's block failed, or the page breaks the marking convention."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    directive: str | None = None  # "skip" or "server"
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse(text: str, page: str = "<page>") -> list[Block]:
    """Every fenced block of ``text`` with its marker; refuses what it cannot classify."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: tuple[int, str, str] | None = None  # (line, directive, reason) of a marker
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if marker:
            if pending:
                raise DocError(f"{page}:{pending[0]}: a doc-test marker with no block after it")
            pending = (i + 1, *_directive(marker["body"], f"{page}:{i + 1}"))
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if pending and lines[i].strip():
                raise DocError(
                    f"{page}:{pending[0]}: a doc-test marker must come right before a fence"
                )
            i += 1
            continue
        start, indent, close = i, fence["indent"], fence["fence"]
        body: list[str] = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(close) and set(lines[i].strip()) <= {close[0]}
        ):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise DocError(f"{page}:{start + 1}: a fence that is never closed")
        i += 1
        lang = fence["info"].lower()
        directive, reason = (pending[1], pending[2]) if pending else (None, "")
        pending = None
        block = Block(page, start + 1, lang, "\n".join(body) + "\n", directive, reason)
        _classify(block)
        blocks.append(block)
    if pending:
        raise DocError(f"{page}:{pending[0]}: a doc-test marker with no block after it")
    return blocks


def _directive(body: str, where: str) -> tuple[str, str]:
    name, _, rest = body.partition(" ")
    reason = rest.strip().lstrip("\u2014\u2013-:").strip()  # em dash, en dash
    if name not in DIRECTIVES:
        raise DocError(
            f"{where}: unknown doc-test marker {name!r}; use one of {sorted(DIRECTIVES)}"
        )
    if name == "skip" and not reason:
        raise DocError(f"{where}: a skipped block needs its reason: <!-- doc-test: skip — WHY -->")
    return name, reason


def _classify(block: Block) -> None:
    if block.directive == "skip":
        return
    runnable = PYTHON | SHELL | CONSOLE
    if block.directive == "server" and block.lang not in runnable:
        raise DocError(f"{block.where}: a server block must be python, bash or console")
    if _starts_a_server(block):
        raise DocError(
            f"{block.where}: this block starts a server, which runs until stopped: mark it "
            "<!-- doc-test: skip — WHY -->, and give the blocks that call a server "
            "<!-- doc-test: server -->"
        )
    if block.lang in runnable | DATA | SHOWN:
        return
    raise DocError(
        f"{block.where}: cannot classify a ```{block.lang or '(no language)'} block: tag it "
        "python, bash, console, json, toml or text, or mark it "
        "<!-- doc-test: skip — WHY --> on the line before its fence"
    )


def _starts_a_server(block: Block) -> bool:
    if block.lang in SHELL:
        return bool(SERVES.search(block.code))
    if block.lang in CONSOLE:  # a command shown failing at startup may run
        return any(
            SERVES.search(command) for command, error in console_commands(block) if not error
        )
    return False


# -- running -----------------------------------------------------------------------


@dataclass
class Page:
    """One page's run: its working directory, its environment, its Python globals."""

    name: str
    workdir: Path
    env: dict[str, str]
    namespace: dict[str, object] = field(default_factory=dict)
    server: object | None = None  # tests.server.harness.Server, once started
    ran: list[Block] = field(default_factory=list)


def page_env(workdir: Path, bin_dir: Path) -> dict[str, str]:
    """The environment every block of a page runs in: a store in its directory, a home
    of its own, and ``erstwhile`` meaning this interpreter's erstwhile."""
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "erstwhile"
    script.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
        "'from erstwhile.cli import main; main()' \"$@\"\n"
    )
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERSTWHILE_")}
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "ERSTWHILE_DB": str(workdir / "memory.db"),
        "NO_COLOR": "1",
        "COLUMNS": "120",
    }
    return env


def run_block(page: Page, block: Block) -> None:
    if block.directive == "skip" or block.lang in SHOWN:
        return
    try:
        if block.lang in DATA:
            _parse_data(block)
        elif block.lang in PYTHON:
            _run_python(page, block)
        elif block.lang in SHELL:
            _run_shell(page, block, block.code, expect_error=None)
        else:
            for command, code in console_commands(block):
                _run_shell(page, block, command, expect_error=code)
    except DocError:
        raise
    except BaseException as error:
        line = _page_line(error, block)
        raise DocError(f"{line}: the {block.lang} block failed: {error!r}") from error
    page.ran.append(block)


def _page_line(error: BaseException, block: Block) -> str:
    """page:line of the page's own line where ``error`` was raised, else the block's."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == block.page]
    if not frames:
        return block.where
    return f"{block.page}:{frames[-1].lineno} ({(frames[-1].line or '').strip()})"


def console_commands(block: Block) -> Iterator[tuple[str, str | None]]:
    """(command, the error code its shown output expects or None) of a console block."""
    lines = block.code.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = [lines[i][2:]]
        while command[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        shown = lines[i] if i < len(lines) and not lines[i].startswith("$ ") else ""
        error = ERROR_LINE.match(shown)
        yield "\n".join(command), error["code"] if error else None


def _parse_data(block: Block) -> None:
    if block.lang == "toml":
        data = tomllib.loads(block.code)
        from erstwhile.config import Settings

        if data and set(data) <= set(Settings.model_fields):
            Settings(**data)  # erstwhile's own settings: every key known, every value valid
        return
    try:
        json.loads(block.code)
    except ValueError:  # JSON Lines: one document a line
        for line in block.code.splitlines():
            if line.strip():
                json.loads(line)


def _run_python(page: Page, block: Block) -> None:
    # padded so a traceback's line numbers are the page's own
    source = "\n" * block.line + block.code
    linecache.cache[block.page] = (len(source), None, source.splitlines(True), block.page)
    code = compile(source, block.page, "exec")
    with _environment(page.env), contextlib.chdir(page.workdir):
        exec(code, page.namespace)


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run_shell(page: Page, block: Block, script: str, expect_error: str | None) -> None:
    options = "set -o pipefail\n" if expect_error else "set -eo pipefail\n"
    done = subprocess.run(
        ["bash", "-c", options + script],
        cwd=page.workdir,
        env=page.env,
        capture_output=True,
        text=True,
        timeout=BLOCK_SECONDS,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    said = f"\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    if expect_error is None and done.returncode != 0:
        raise DocError(f"{block.where}: exit {done.returncode} from\n{script}{said}")
    if expect_error is not None:
        if done.returncode == 0:
            raise DocError(f"{block.where}: expected {expect_error}, but it succeeded:\n{script}")
        if f"error: {expect_error}:" not in done.stdout + done.stderr:
            raise DocError(f"{block.where}: expected error {expect_error} from\n{script}{said}")


def close_all(page: Page) -> None:
    """Closes whatever stores and clients the page's Python left open."""
    import erstwhile

    for value in list(page.namespace.values()):
        held = getattr(value, "memory", value)  # a store built on one (LangGraph's)
        if isinstance(held, erstwhile.Memory | erstwhile.Client):
            with contextlib.suppress(Exception):
                held.close()
    page.namespace.clear()

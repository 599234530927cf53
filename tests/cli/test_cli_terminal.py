"""No control character reaches the terminal (issue #43, item 6): entity names lose
them where names are made (extraction, resolution, asserted facts), and every string
the CLI prints for people shows one as a visible escape (``\\x1b``); ``--json`` stays
exact JSON (which escapes them)."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import TYPE_CHECKING

import erstwhile
from erstwhile.domain.graph import normalise_extraction

if TYPE_CHECKING:
    from conftest import Cli

#: What a terminal may act on: C0 controls but newline and tab, DEL, C1 controls.
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TITLE = "\x1b]0;pwned\x07"  # sets the terminal's window title
EVIL = f"Evil{TITLE}Corp \x00\x7f\x9b2J"


def test_entity_names_lose_control_characters() -> None:
    raw = {"entities": [{"name": EVIL, "kind": "organization", "aliases": ["E\x1bvil"]}]}
    (entity,) = normalise_extraction(raw).entities
    assert entity.name == "Evil ]0;pwned Corp 2J" and entity.aliases == ("E vil",)
    assert not CONTROLS.search(entity.name)


def test_human_output_escapes_controls_and_json_keeps_them(cli: Cli) -> None:
    record = cli.add(f"A note about {EVIL}", "--id", "n1", "--tag", TITLE, "--key", f"k{TITLE}")
    with erstwhile.open(cli.db, embedder="none", background_jobs=False) as memory:
        memory.assert_fact("default", EVIL, "uses", "Tool\x1b[2J")
    names = [e["name"] for e in cli.json("entities")["entities"]]
    assert names == ["Evil ]0;pwned Corp 2J", "Tool [2J"]
    # an entity stored before names were cleaned still prints safely
    with sqlite3.connect(cli.db) as conn:
        conn.execute("UPDATE entities SET name = ? WHERE name LIKE 'Tool%'", (f"Old{TITLE}",))
    for args in (
        ("entities",),
        ("get", record),
        ("history", record),
        ("search", "note"),
        ("search", "note", "--ids-only"),
        ("add", "second", "--tag", f"t{TITLE}"),
        ("delete", f"missing{TITLE}"),  # an error on stderr
    ):
        result = cli(*args)
        for stream in (result.stdout, result.stderr):
            assert not CONTROLS.search(stream), (args, stream)
        if args[0] in ("entities", "get", "history") or args == ("search", "note"):
            assert "\\x1b" in result.stdout, (args, result.stdout)  # shown, escaped
    # JSON output is exact: the same strings, escaped as JSON escapes them
    got = cli.ok("get", record, "--json").stdout
    assert not CONTROLS.search(got)
    assert json.loads(got)["content"] == f"A note about {EVIL}"
    assert json.loads(got)["tags"] == [TITLE]

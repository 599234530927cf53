"""Record commands against a real SQLite file: add, get, history, supersede,
invalidate, delete, expire, verify."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]
QUESTION = "Where does Alice work?"


def test_add_prints_the_id_and_version(cli: Cli) -> None:
    result = cli.ok("add", "The user drives a red car", "--key", "user.car")
    assert result.stdout.startswith("stored ")
    assert "version 1" in result.stdout

    data = cli.json("add", "The user likes tea", "--id", "tea")
    assert data == {"ids": ["tea"], "versions": [1], "warnings": []}


def test_add_stores_every_record_option(cli: Cli) -> None:
    record_id = cli.add(
        "Deploys happen on Tuesdays",
        "--id", "deploy-day",
        "--key", "team.deploy_day",
        "--kind", "Decision",
        "--tag", "ops", "-t", "process",
        "--meta", "priority=3", "-m", "url=https://x?a=b",
        "--valid-from", "2024-01-01",
        "--valid-to", "2030-01-01T00:00:00+02:00",
        "--source", "meeting-42",
    )  # fmt: skip
    record = cli.json("get", record_id)
    assert record["id"] == "deploy-day"
    assert record["key"] == "team.deploy_day"
    assert record["kind"] == "decision"
    assert record["tags"] == ["ops", "process"]
    assert record["metadata"] == {"priority": "3", "url": "https://x?a=b"}
    assert record["valid_from"] == "2024-01-01T00:00:00.000000Z"
    assert record["valid_to"] == "2029-12-31T22:00:00.000000Z"
    assert record["source"] == "meeting-42"
    assert record["trust"] == "unverified"
    assert record["version"] == 1


def test_supersede_then_search_now_as_of_and_history(cli: Cli, text: Plain) -> None:
    acme = cli.add("Alice works at Acme", "--key", "alice.employer", "--valid-from", "2023-01-01")
    found = cli.json("search", QUESTION)
    assert [hit["record"]["content"] for hit in found["hits"]] == ["Alice works at Acme"]

    table = cli.ok("search", QUESTION).stdout
    assert acme in table
    assert "Alice works at Acme" in table
    assert "2023-01-01 → open" in table

    revised = cli.json("supersede", acme, "Alice works at Globex", "--valid-from", "2024-06-01")
    globex = revised["ids"][0]
    assert revised["versions"] == [1]

    now = cli.json("search", QUESTION)
    assert [hit["record"]["id"] for hit in now["hits"]] == [globex]
    assert now["hits"][0]["record"]["key"] == "alice.employer"  # the key moved
    assert cli.search_ids(QUESTION, "--as-of", "2023-09-01") == [acme]
    assert cli.search_ids(QUESTION, "--as-of", "2024-06-01") == [globex]  # touching != overlap
    assert set(cli.search_ids(QUESTION, "--include-historical")) == {acme, globex}

    for member in (acme, globex):
        versions = cli.json("history", member)["versions"]
        assert [v["content"] for v in versions] == ["Alice works at Acme", "Alice works at Globex"]
        assert versions[0]["valid_to"] == "2024-06-01T00:00:00.000000Z"
        assert versions[0]["superseded_by"] == globex
        assert versions[1]["supersedes"] == [acme]

    history = text(cli.ok("history", globex).stdout)
    assert history.index("Alice works at Acme") < history.index("Alice works at Globex")
    assert "2023-01-01 → 2024-06-01 alice.employer 2 superseded" in history
    assert "2024-06-01 → open alice.employer 1 current" in history


def test_history_shows_record_time_and_every_version_with_versions(cli: Cli, text: Plain) -> None:
    record_id = cli.add("Alice works at Acme")
    cli.ok("add", "Alice works at Acme Corp", "--id", record_id)  # rewritten in place
    chain = cli.json("history", record_id)["versions"]
    assert [(v["version"], v["known_until"]) for v in chain] == [(2, None)]
    every = cli.json("history", record_id, "--versions")["versions"]
    assert [v["content"] for v in every] == ["Alice works at Acme", "Alice works at Acme Corp"]
    assert every[0]["known_until"] == every[1]["updated_at"]
    assert every[1]["known_until"] is None
    table = text(cli.ok("history", record_id, "--versions").stdout)
    assert "known" in table and "→ now" in table  # the current version's range: no end


def test_get_shows_a_record_and_its_earlier_versions(cli: Cli, text: Plain) -> None:
    acme = cli.add("Alice works at Acme", "--valid-from", "2023-01-01")
    cli.ok("supersede", acme, "Alice works at Globex", "--valid-from", "2024-06-01")

    first = cli.json("get", acme, "--version", "1")
    latest = cli.json("get", acme)
    assert first["version"] == 1
    assert "valid_to" not in first
    assert "superseded_by" not in first
    assert latest["version"] == 2
    assert latest["valid_to"] == "2024-06-01T00:00:00.000000Z"

    panel = text(cli.ok("get", acme).stdout)
    assert acme in panel
    assert "content Alice works at Acme" in panel
    assert "status superseded" in panel
    assert "superseded by" in panel
    cli.fails(1, "get", acme, "--version", "7")


def test_invalidate_ends_validity_without_a_replacement(cli: Cli) -> None:
    record_id = cli.add("The office is in Berlin", "--valid-from", "2020-01-01")
    result = cli.json("invalidate", record_id, "--at", "2021-01-01")
    assert result["ids"] == [record_id]
    assert result["versions"] == [2]

    assert cli.search_ids("office") == []
    assert cli.search_ids("office", "--as-of", "2020-06-01") == [record_id]
    record = cli.json("get", record_id)
    assert record["valid_to"] == "2021-01-01T00:00:00.000000Z"
    assert "superseded_by" not in record

    other = cli.add("Another fact")
    assert cli.ok("invalidate", other).stdout.startswith(f"invalidated {other} version 2")
    assert cli.search_ids("fact") == []


def test_soft_delete_hides_from_search_but_keeps_the_record(cli: Cli) -> None:
    record_id = cli.add("A secret plan")
    assert cli.ok("delete", record_id).stdout.strip() == f"deleted {record_id}"

    assert cli.search_ids("plan") == []
    assert cli.search_ids("plan", "--include-historical") == [record_id]
    assert "deleted_at" in cli.json("get", record_id)


def test_hard_delete_then_get_fails_with_not_found(cli: Cli) -> None:
    record_id = cli.add("Forget me entirely")
    assert cli.json("delete", record_id, "--hard") == {"ids": [record_id], "hard": True}

    result = cli.fails(1, "get", record_id)
    assert result.stderr.startswith("error: erstwhile.not_found: ")
    assert record_id in result.stderr
    assert result.stdout == ""
    cli.fails(1, "history", record_id)
    assert cli.search_ids("forget", "--include-historical") == []


def test_expire_reports_the_affected_count(cli: Cli) -> None:
    for n in range(3):
        cli.add(f"temporary note {n}", "--meta", "team=x")
    keep = cli.add("a note to keep", "--meta", "team=y")

    result = cli.json("expire", "--filter", "team=x", "--action", "soft_delete", "--max-rows", "2")
    assert result == {"affected": 2}
    assert len(cli.search_ids("note")) == 2

    human = cli.ok("expire", "--where", "team in x,z", "--action", "hard_delete", "--max-rows", "5")
    # The filter matches the soft-deleted records too: all three are removed.
    assert human.stdout.strip() == "3 records affected"
    assert cli.search_ids("note", "--include-historical") == [keep]
    assert cli.json("expire", "--where", "team=y", "--action", "invalidate", "--max-rows", "1") == {
        "affected": 1
    }
    assert cli.search_ids("note") == []


def test_verify_promotes_trust(cli: Cli) -> None:
    checked = cli.add("The API key rotates monthly")
    unchecked = cli.add("The API is rate limited")

    assert cli.search_ids("API", "--min-trust", "verified") == []
    assert cli.json("verify", checked, "--reviewer", "alice")["ids"] == [checked]

    assert cli.json("get", checked)["trust"] == "verified"
    assert cli.json("get", unchecked)["trust"] == "unverified"
    assert cli.search_ids("API", "--min-trust", "verified") == [checked]
    assert cli.ok("verify", unchecked, "--reviewer", "bob").stdout.startswith("verified ")


def test_if_version_conflict_is_reported(cli: Cli) -> None:
    cli.add("first", "--id", "x", "--if-version", "0")
    result = cli.fails(1, "add", "second", "--id", "x", "--if-version", "0")
    assert result.stderr.startswith("error: erstwhile.write.version_conflict: ")
    assert cli.json("get", "x")["content"] == "first"

    cli.ok("add", "second", "--id", "x", "--if-version", "1")
    assert cli.json("get", "x")["version"] == 2


def test_a_held_key_is_a_write_conflict(cli: Cli) -> None:
    cli.add("The user drives a red car", "--key", "user.car")
    result = cli.fails(1, "add", "The user drives a blue car", "--key", "user.car")
    assert result.stderr.startswith("error: erstwhile.write.conflict: ")


def test_namespaces_are_separate(cli: Cli) -> None:
    cli.add("Namespaced memory", "-n", "agent-a")
    assert cli.search_ids("namespaced") == []
    assert len(cli.search_ids("namespaced", "--namespace", "agent-a")) == 1

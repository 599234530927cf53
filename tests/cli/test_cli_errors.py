"""Mistakes end with one line on stderr, the right exit code, and no traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
import typer

from erstwhile.cli.app import exit_code
from erstwhile.cli.options import parse_pairs, parse_where
from erstwhile.domain.errors import InvalidInput, NotFound, PolicyLimit, WriteConflict

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]


def test_from_without_until_names_the_missing_end(cli: Cli) -> None:
    result = cli.fails(2, "search", "x", "--from", "2024-01-01")
    assert result.stderr.startswith("error: erstwhile.input.invalid: ")
    assert "until is missing" in result.stderr

    result = cli.fails(2, "search", "x", "--until", "2024-01-01")
    assert "from is missing" in result.stderr


def test_bad_time_options_are_input_errors(cli: Cli) -> None:
    reversed_window = cli.fails(2, "search", "x", "--from", "2024-01-02", "--until", "2024-01-01")
    assert "erstwhile.input.invalid" in reversed_window.stderr

    bad_instant = cli.fails(2, "search", "x", "--as-of", "yesterday")
    assert "as_of" in bad_instant.stderr
    assert "RFC 3339" in bad_instant.stderr

    both = cli.fails(2, "search", "x", "--as-of", "2024-01-01", "--include-historical")
    assert "mutually exclusive" in both.stderr

    bad_validity = cli.fails(
        2, "add", "x", "--valid-from", "2024-01-02", "--valid-to", "2024-01-01"
    )
    assert "valid_to" in bad_validity.stderr
    cli.fails(2, "invalidate", "some-id", "--at", "not-a-time")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--filter", "no-equals-sign"), ("--filter", "=value"), ("--where", "priority")],
)
def test_bad_cli_syntax_names_the_option(cli: Cli, text: Plain, option: str, value: str) -> None:
    result = cli.fails(2, "search", "x", option, value)
    assert f"Invalid value for {option}" in text(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize(
    "expression", ["priority", "priority>>3", "priority>=", "p in a,,b", ">=3"]
)
def test_bad_where_is_a_usage_error(cli: Cli, text: Plain, expression: str) -> None:
    for command in (["search", "x"], ["expire", "--action", "invalidate", "--max-rows", "1"]):
        result = cli.fails(2, *command, "--where", expression)
        assert "Invalid value for --where" in text(result.stderr)


def test_bad_meta_and_duplicate_keys(cli: Cli, text: Plain) -> None:
    assert "Invalid value for --meta" in text(cli.fails(2, "add", "x", "--meta", "k").stderr)
    duplicate = cli.fails(2, "search", "x", "-f", "a=1", "-f", "a=2")
    assert "given twice" in text(duplicate.stderr)


def test_numeric_where_with_a_word_is_refused_by_the_domain(cli: Cli) -> None:
    result = cli.fails(2, "search", "x", "--where", "priority>=high")
    assert result.stderr.startswith("error: erstwhile.input.invalid: ")
    assert "not a number" in result.stderr


def test_invalid_namespace_and_missing_required_options(cli: Cli, text: Plain) -> None:
    result = cli.fails(2, "add", "x", "--namespace", "Not Valid")
    assert result.stderr.startswith("error: erstwhile.input.invalid: namespace")

    assert "--max-rows" in text(cli.fails(2, "expire", "--action", "invalidate").stderr)
    assert "--action" in text(cli.fails(2, "expire", "--max-rows", "3").stderr)
    assert "--reviewer" in text(cli.fails(2, "verify", "some-id").stderr)
    cli.fails(2, "expire", "--action", "explode", "--max-rows", "3")
    cli.fails(2, "search", "x", "--min-trust", "maybe")


def test_not_found_is_exit_code_1(cli: Cli) -> None:
    for command in (["get", "nope"], ["delete", "nope"], ["verify", "nope", "--reviewer", "a"]):
        result = cli.fails(1, *command)
        assert result.stderr.startswith("error: erstwhile.not_found: ")


def test_an_unopenable_database_is_one_line(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from erstwhile.cli import app

    result = CliRunner().invoke(app, ["--db", str(tmp_path), "get", "x"])  # a directory
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"error: erstwhile.storage.unavailable: cannot open database {tmp_path}"
    )

    url = CliRunner().invoke(app, ["--db", "mysql://db/memory", "get", "x"])
    assert url.exit_code == 2
    assert url.stderr.startswith("error: erstwhile.input.invalid: storage url scheme")

    # a PostgreSQL URL is a backend now; a server that is not there is one line too
    down = CliRunner().invoke(app, ["--db", "postgresql://127.0.0.1:1/memory", "get", "x"])
    assert down.exit_code == 1
    assert down.stderr.startswith(
        "error: erstwhile.storage.unavailable: cannot connect to postgresql://@127.0.0.1:1/memory"
    )


def test_exit_codes_by_error_class() -> None:
    assert exit_code(InvalidInput("x")) == 2
    assert exit_code(PolicyLimit("x")) == 2
    assert exit_code(NotFound("x")) == 1
    assert exit_code(WriteConflict("x")) == 1


@pytest.mark.parametrize(
    ("expression", "predicate"),
    [
        ("priority>=3", {"key": "priority", "op": "GTE", "values": ["3"]}),
        ("priority <= -2.5", {"key": "priority", "op": "LTE", "values": ["-2.5"]}),
        ("team!=ops", {"key": "team", "op": "NEQ", "values": ["ops"]}),
        ("team=a=b", {"key": "team", "op": "EQ", "values": ["a=b"]}),
        ("n>1e3", {"key": "n", "op": "GT", "values": ["1e3"]}),
        ("n<0", {"key": "n", "op": "LT", "values": ["0"]}),
        ("status in open, blocked", {"key": "status", "op": "IN", "values": ["open", "blocked"]}),
        ("status IN done", {"key": "status", "op": "IN", "values": ["done"]}),
        ("title = in progress", {"key": "title", "op": "EQ", "values": ["in progress"]}),
    ],
)
def test_parse_where(expression: str, predicate: dict[str, Any]) -> None:
    assert parse_where(expression) == predicate


def test_parse_pairs_keeps_equals_signs_in_values() -> None:
    assert parse_pairs(["url=https://x?a=b", "empty="], "--filter") == {
        "url": "https://x?a=b",
        "empty": "",
    }
    with pytest.raises(typer.BadParameter):
        parse_pairs(["novalue"], "--filter")

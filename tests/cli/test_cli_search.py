"""The search command: scope options, time options and both output forms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Cli

Plain = Callable[[str], str]


def add_tasks(cli: Cli) -> dict[str, str]:
    """Four tasks whose priorities sort differently as text and as numbers."""
    priorities = {"ten": "10", "three": "3", "two": "2", "high": "high"}
    return {
        name: cli.add(f"task {name}", "--id", f"task-{name}", "--meta", f"priority={p}")
        for name, p in priorities.items()
    }


def test_where_compares_numbers_numerically(cli: Cli) -> None:
    ids = add_tasks(cli)
    # As text "10" < "3"; as numbers 10 > 3. A non-numeric stored value is skipped.
    assert set(cli.search_ids("task", "--where", "priority>=3")) == {ids["ten"], ids["three"]}
    assert cli.search_ids("task", "--where", "priority>3") == [ids["ten"]]
    assert cli.search_ids("task", "--where", "priority < 3") == [ids["two"]]
    assert set(cli.search_ids("task", "--where", "priority<=3")) == {ids["two"], ids["three"]}
    assert set(cli.search_ids("task", "-w", "priority>=2", "-w", "priority<10")) == {
        ids["two"],
        ids["three"],
    }


def test_where_text_operators(cli: Cli) -> None:
    ids = add_tasks(cli)
    assert cli.search_ids("task", "--where", "priority=high") == [ids["high"]]
    assert cli.search_ids("task", "--where", "priority==10") == [ids["ten"]]
    assert set(cli.search_ids("task", "--where", "priority != 10")) == {
        ids["three"],
        ids["two"],
        ids["high"],
    }
    assert set(cli.search_ids("task", "--where", "priority in 2,high")) == {ids["two"], ids["high"]}


def test_filter_tag_kind_and_key_scope_the_search(cli: Cli) -> None:
    car = cli.add(
        "The user drives a red car", "--tag", "user", "--tag", "vehicle", "--meta", "src=chat"
    )
    bike = cli.add("The user rides a bike", "--tag", "user", "--kind", "fact", "--key", "user.bike")
    cli.add("The user car insurance", "--meta", "src=email")

    assert cli.search_ids("car", "--filter", "src=chat") == [car]
    assert cli.search_ids("user", "--tag", "vehicle") == [car]
    assert set(cli.search_ids("user", "--tag", "user")) == {car, bike}
    assert cli.search_ids("user", "--tag", "user", "--tag", "vehicle") == [car]
    assert cli.search_ids("user", "--kind", "fact") == [bike]
    assert cli.search_ids("user", "--key", "user.bike") == [bike]
    assert cli.search_ids("car", "-f", "src=chat", "-w", "src in chat,email") == [car]


def test_between_window_and_created_bounds(cli: Cli) -> None:
    old = cli.add("Project alpha started", "--valid-from", "2020-01-01", "--valid-to", "2021-01-01")
    new = cli.add("Project beta started", "--valid-from", "2022-01-01")

    assert cli.search_ids("project", "--from", "2020-06-01", "--until", "2020-07-01") == [old]
    assert cli.search_ids("project", "--from", "2021-01-01", "--until", "2022-01-01") == []
    both = cli.search_ids("project", "--from", "2020-06-01", "--until", "2022-06-01")
    assert set(both) == {old, new}

    created = cli.json("get", new)["created_at"]
    assert cli.search_ids("project", "--include-historical", "--created-before", created) == [old]
    assert cli.search_ids("project", "--include-historical", "--created-after", "2000-01-01") in (
        [old, new],
        [new, old],
    )


def test_top_k_and_ids_only(cli: Cli) -> None:
    ids = add_tasks(cli)
    assert len(cli.search_ids("task", "--top-k", "2")) == 2

    data = cli.json("search", "task", "--ids-only", "--where", "priority>3")
    assert data["hits"] == [{"record": {"id": ids["ten"]}, "score": data["hits"][0]["score"]}]

    human = cli.ok("search", "task", "--ids-only", "--where", "priority>=3")
    assert sorted(human.stdout.split()) == sorted([ids["ten"], ids["three"]])


def test_json_output_is_the_search_result(cli: Cli) -> None:
    record_id = cli.add("Café in Zürich", "--meta", "city=Zürich")
    result = cli.ok("search", "café", "--json")
    assert "Zürich" in result.stdout  # ensure_ascii=False
    assert result.stderr == ""  # no embedder line, warnings stay inside the JSON
    data = cli.json("search", "café")
    assert set(data) == {"hits", "ranking", "unembedded", "warnings"}
    assert data["ranking"] == "hybrid"  # auto, with an embedder
    assert data["hits"][0]["record"]["id"] == record_id
    assert data["hits"][0]["signals"]["lexical"]["rank"] == 1
    assert data["warnings"] == []


def test_auto_ranking_without_an_embedder_answers_lexically_with_a_warning(cli: Cli) -> None:
    record_id = cli.json("--embedder", "none", "add", "Café in Zürich")["ids"][0]
    data = cli.json("--embedder", "none", "search", "café")
    assert data["ranking"] == "lexical"
    assert [hit["record"]["id"] for hit in data["hits"]] == [record_id]
    assert data["warnings"][0].startswith("semantic_unavailable")

    note, warning = cli.ok("--embedder", "none", "search", "café").stderr.splitlines()
    assert note == "embedder: none · ranking: lexical"
    assert warning.startswith("warning: semantic_unavailable: ")


def test_human_output_is_a_table_and_notes_go_to_stderr(cli: Cli, text: Plain) -> None:
    record_id = cli.add("Bob likes [bold]tea[/bold]", "--valid-from", "2023-01-01")
    result = cli.ok("search", "tea")
    table = text(result.stdout)
    # Columns: rank, score, lanes, id, content (markup shown as typed), validity.
    assert table.startswith("# score lanes id content valid 1 ")
    assert f"LS {record_id} Bob likes [bold]tea[/bold] 2023-01-01 → open" in table
    assert "embedder" not in result.stdout and "warning" not in result.stdout
    assert result.stderr.startswith("embedder: hash:")
    assert result.stderr.endswith(" · ranking: hybrid\n")

    lexical = text(cli.ok("search", "tea", "--ranking", "lexical").stdout)
    assert f"L {record_id} Bob likes" in lexical

    empty = cli.ok("search", "nothing-matches-this", "--ranking", "lexical")
    assert "no records match" in empty.stdout


def test_semantic_ranking_without_an_embedder_is_refused(cli: Cli) -> None:
    cli.add("some text")
    result = cli.fails(1, "--embedder", "none", "search", "text", "--ranking", "semantic")
    assert result.stderr.startswith("error: erstwhile.search.semantic_unavailable: ")
    data = cli.json("--embedder", "none", "search", "text", "--ranking", "lexical")
    assert data["warnings"] == []


def test_known_at_and_changes(cli: Cli) -> None:
    first = cli.add("the launch is on june ten")
    recorded = cli.json("get", first)["updated_at"]
    cli.ok("supersede", first, "the launch moved to june seventeen")
    assert len(cli.search_ids("launch", "--ranking", "lexical")) == 1
    assert cli.search_ids("launch", "--ranking", "lexical", "--known-at", recorded) == [first]
    assert cli.json("get", first, "--known-at", recorded)["version"] == 1
    past = cli.json("history", first, "--known-at", recorded)["versions"]
    assert [r["id"] for r in past] == [first]
    page = cli.json("changes", "--since", "2000-01-01")
    assert [c["change"] for c in page["changes"]] == ["added", "superseded", "added"]
    assert "changes" in cli.ok("changes", "--since", "2000-01-01", "--limit", "1").stdout
    assert cli("changes", "--since", "soon").exit_code != 0

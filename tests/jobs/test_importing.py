"""Bulk import: JSON Lines of records and conversation transcripts, through the Python
API and the CLI, on a real SQLite file. Bad input is refused whole, naming the line;
valid input is written in atomic batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import erstwhile
from erstwhile.cli import app
from erstwhile.embedding import HashEmbedder
from erstwhile.jobs.importing import conversation_records, import_conversation, import_jsonl

NS = "imported"


@pytest.fixture
def lexical_memory(tmp_path: Path) -> Iterator[erstwhile.Memory]:
    m = erstwhile.open(tmp_path / "plain.db", embedder="none", background_jobs=False)
    yield m
    m.close()


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def written_namespaces(memory: erstwhile.Memory) -> list[str]:
    return memory.service.store.namespaces()


def test_jsonl_records_are_imported_in_file_order(memory: erstwhile.Memory, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "records.jsonl",
        {
            "id": "car-1",
            "content": "The user drives a red car",
            "key": "user.car",
            "valid_from": "2023-01-01",
            "metadata": {"source": "chat", "priority": 2},
        },
        "",
        {
            "id": "car-2",
            "content": "The user drives a blue car",
            "supersedes": ["car-1"],
            "valid_from": "2024-06-01T00:00:00+02:00",
        },
        {"id": "note", "content": "Likes tea", "tags": ["drinks"], "namespace": "elsewhere"},
        {"id": "note", "content": "Likes green tea", "tags": ["drinks"]},
    )
    progress: list[tuple[int, int]] = []
    report = import_jsonl(
        memory, NS, path, progress=lambda done, total: progress.append((done, total))
    )

    assert (report.namespace, report.records) == (NS, 4)
    assert report.ids == ["car-1", "car-2", "note", "note"]
    assert progress[-1] == (4, 4)
    old, new = memory.get(NS, "car-1"), memory.get(NS, "car-2")
    assert old.superseded_by == "car-2" and old.valid_to == new.valid_from
    assert new.key == "user.car" and new.valid_from.isoformat() == "2024-05-31T22:00:00+00:00"
    assert old.metadata == {"source": "chat", "priority": "2"}
    note = memory.get(NS, "note")
    assert (note.version, note.content, note.tags) == (2, "Likes green tea", ["drinks"])
    assert written_namespaces(memory) == [NS]  # a namespace field in a line is ignored
    hits = memory.search(NS, "car", ranking="lexical").ids()
    assert hits == ["car-2"]  # the superseded line is history, not current


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ('{"id": "b", "content": "two"', "line 3 is not valid JSON"),
        ('["not", "a", "record"]', "line 3 must be a JSON object holding one record, got an array"),
        ('{"content": "x", "valid_from": "yesterday"}', "line 3: valid_from"),
        ('{"content": "x", "colour": "red"}', "line 3: colour is not a known field"),
        ('{"content": "x", "vector": [0.1, 0.2]}', "line 3: vector has 2 dimensions"),
    ],
)
def test_a_bad_jsonl_line_is_named_and_nothing_is_written(
    memory: erstwhile.Memory, tmp_path: Path, bad_line: str, expected: str
) -> None:
    path = write_lines(
        tmp_path / "bad.jsonl",
        {"id": "a", "content": "one"},
        "  ",
        bad_line,
        {"id": "c", "content": "three"},
    )
    with pytest.raises(erstwhile.InvalidInput) as raised:
        import_jsonl(memory, NS, path, batch_size=1)
    assert raised.value.code == "erstwhile.input.invalid"
    assert f"bad.jsonl {expected}" in raised.value.message
    assert written_namespaces(memory) == []


def test_a_vector_without_an_embedder_is_refused_before_writing(
    lexical_memory: erstwhile.Memory, tmp_path: Path
) -> None:
    path = write_lines(
        tmp_path / "v.jsonl", {"content": "one"}, {"content": "two", "vector": [1.0, 0.0]}
    )
    with pytest.raises(erstwhile.SemanticUnavailable, match=r"v\.jsonl line 2: vector was given"):
        import_jsonl(lexical_memory, NS, path)
    assert written_namespaces(lexical_memory) == []


def test_an_unreadable_file_is_invalid_input(memory: erstwhile.Memory, tmp_path: Path) -> None:
    with pytest.raises(erstwhile.InvalidInput, match="cannot read"):
        import_jsonl(memory, NS, tmp_path / "missing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"content": "caf\xe9"}\n')
    with pytest.raises(erstwhile.InvalidInput, match="not UTF-8"):
        import_jsonl(memory, NS, tmp_path / "latin1.jsonl")


def test_batches_are_atomic_and_a_store_refusal_names_the_line(
    memory: erstwhile.Memory, tmp_path: Path
) -> None:
    # Lines 1-2 are batch 1; line 3 supersedes an id nobody wrote, which only the
    # store can tell: batch 1 stays written, batch 2 (lines 3-4) is written not at all.
    path = write_lines(
        tmp_path / "partial.jsonl",
        {"id": "a", "content": "alpha"},
        {"id": "b", "content": "beta"},
        {"id": "c", "content": "gamma", "supersedes": ["ghost"]},
        {"id": "d", "content": "delta"},
    )
    with pytest.raises(erstwhile.NotFound) as raised:
        import_jsonl(memory, NS, path, batch_size=2)
    message = raised.value.message
    assert "line 3.supersedes[0] names 'ghost'" in message
    assert "2 records before line 3 were written; nothing from line 3 on was" in message
    assert [memory.get(NS, i).content for i in ("a", "b")] == ["alpha", "beta"]
    for missing in ("c", "d"):
        with pytest.raises(erstwhile.NotFound):
            memory.get(NS, missing)


def test_an_id_repeated_inside_one_batch_becomes_two_versions(
    memory: erstwhile.Memory, tmp_path: Path
) -> None:
    path = write_lines(
        tmp_path / "twice.jsonl", {"id": "x", "content": "first"}, {"id": "x", "content": "second"}
    )
    report = import_jsonl(memory, NS, path, batch_size=100)
    assert report.batches == 2
    assert [r.content for r in memory.history(NS, "x")] == ["second"]
    assert memory.get(NS, "x", version=1).content == "first"


def test_batch_size_must_be_positive(memory: erstwhile.Memory, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "one.jsonl", {"content": "one"})
    with pytest.raises(erstwhile.InvalidInput, match="batch_size"):
        import_jsonl(memory, NS, path, batch_size=0)


# -- conversations -----------------------------------------------------------------------

SESSIONS: list[dict[str, Any]] = [
    {
        "id": "s1",
        "timestamp": "2023-05-08T13:56:00Z",
        "turns": [
            {"speaker": "Caroline", "text": "I went to a support group yesterday.", "id": "D1:1"},
            {
                "speaker": "Melanie",
                "text": "That sounds great!",
                "id": "D1:2",
                "metadata": {"mood": "warm", "speaker": "ignored"},
            },
        ],
    },
    {
        "date": "2023-06-20",
        "turns": [
            {"speaker": "Caroline", "text": "I adopted a puppy named Rex.", "id": "D2:1"},
            {
                "speaker": "Melanie",
                "text": "Pottery class was fun.",
                "timestamp": "2023-06-21T09:00:00Z",
            },
        ],
    },
]


def test_each_turn_becomes_a_record_valid_from_its_time(memory: erstwhile.Memory) -> None:
    report = import_conversation(memory, NS, SESSIONS, conversation="conv-1")
    assert report.ids == ["conv-1/D1:1", "conv-1/D1:2", "conv-1/D2:1", "conv-1/s2t2"]

    first = memory.get(NS, "conv-1/D1:1")
    assert first.kind == "conversation" and first.source == "conv-1"
    assert first.content == "Caroline: I went to a support group yesterday."
    assert first.valid_from.isoformat() == "2023-05-08T13:56:00+00:00"
    assert first.metadata == {
        "speaker": "Caroline",
        "session": "s1",
        "turn": "D1:1",
        "conversation": "conv-1",
    }
    second = memory.get(NS, "conv-1/D1:2")
    assert second.metadata["speaker"] == "Melanie" and second.metadata["mood"] == "warm"
    assert memory.get(NS, "conv-1/D2:1").valid_from.isoformat() == "2023-06-20T00:00:00+00:00"
    last = memory.get(NS, "conv-1/s2t2")
    assert last.valid_from.isoformat() == "2023-06-21T09:00:00+00:00"
    assert last.metadata["session"] == "2" and "turn" not in last.metadata

    # the transcript's time is validity time: as of a date, later turns did not exist yet
    early = memory.search(NS, "Caroline", ranking="lexical", as_of="2023-06-01").ids()
    assert early == ["conv-1/D1:1"]
    assert memory.search(NS, "puppy Rex", ranking="semantic", top_k=1).ids() == ["conv-1/D2:1"]


def test_reimporting_a_conversation_revises_instead_of_duplicating(
    memory: erstwhile.Memory,
) -> None:
    import_conversation(memory, NS, SESSIONS, conversation="conv-1")
    import_conversation(memory, NS, SESSIONS, conversation="conv-1")
    assert memory.get(NS, "conv-1/D1:1").version == 2
    hits = memory.search(NS, "Caroline", ranking="lexical", top_k=50).ids()
    assert sorted(hits) == ["conv-1/D1:1", "conv-1/D2:1"]


def test_without_a_conversation_id_turns_get_new_ids(memory: erstwhile.Memory) -> None:
    report = import_conversation(memory, NS, SESSIONS[:1])
    assert len(set(report.ids)) == 2 and all("/" not in i for i in report.ids)
    assert memory.get(NS, report.ids[0]).source is None


def test_the_template_shapes_the_content(memory: erstwhile.Memory) -> None:
    import_conversation(
        memory, NS, SESSIONS[:1], conversation="c", template='({date}) {speaker} said, "{text}"'
    )
    content = memory.get(NS, "c/D1:2").content
    assert content == '(2023-05-08) Melanie said, "That sounds great!"'


@pytest.mark.parametrize(
    ("sessions", "options", "expected"),
    [
        (
            [{"timestamp": "2023-01-01", "turns": [{"text": "hi"}]}],
            {},
            "sessions[0].turns[0].speaker is required",
        ),
        (
            [
                {
                    "timestamp": "2023-01-01",
                    "turns": [{"speaker": "A", "text": "ok"}, {"speaker": "B", "text": "  "}],
                }
            ],
            {},
            "sessions[0].turns[1].text is required",
        ),
        (
            [SESSIONS[0], {"turns": [{"speaker": "A", "text": "hi"}]}],
            {},
            "sessions[1].turns[0] has no time",
        ),
        ([{"timestamp": "8 May 2023", "turns": []}], {}, "sessions[0].timestamp must be"),
        ([{"timestamp": "2023-01-01"}], {}, "sessions[0].turns is required"),
        (
            [
                {
                    "timestamp": "2023-01-01",
                    "turns": [{"speaker": "A", "text": "x", "metadata": {"n": {"deep": 1}}}],
                }
            ],
            {},
            "sessions[0].turns[0]: metadata.n",
        ),
        (SESSIONS, {"template": "{speaker} {txt}"}, "template field {txt} is unknown"),
        (SESSIONS, {"template": "{speaker}"}, "template must contain {text}"),
        ({"turns": []}, {}, "sessions must be a list"),
    ],
)
def test_bad_transcripts_name_the_turn_and_write_nothing(
    memory: erstwhile.Memory, sessions: Any, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(erstwhile.InvalidInput) as raised:
        import_conversation(memory, NS, sessions, conversation="c", **options)
    assert expected in raised.value.message
    assert written_namespaces(memory) == []


def test_conversation_records_validates_without_writing(memory: erstwhile.Memory) -> None:
    records = list(conversation_records(SESSIONS, conversation="c"))
    assert [where for where, _ in records][-1] == "sessions[1].turns[1]"
    assert written_namespaces(memory) == []


# -- the CLI -----------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ERSTWHILE_EMBEDDER", "hash")
    monkeypatch.delenv("ERSTWHILE_NAMESPACE", raising=False)
    runner = CliRunner()
    db = tmp_path / "cli.db"

    def invoke(*args: str) -> Any:
        return runner.invoke(app, ["--db", str(db), *args])

    return invoke


def test_cli_imports_jsonl_and_conversations(run: Any, tmp_path: Path) -> None:
    lines = write_lines(tmp_path / "r.jsonl", {"id": "a", "content": "alpha"}, {"content": "b"})
    result = run("import", str(lines), "-n", "docs", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["format"], data["records"], data["namespace"]) == ("jsonl", 2, "docs")

    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps({"id": "chat-7", "sessions": SESSIONS}))
    result = run("import", str(transcript), "-n", "talk")
    assert result.exit_code == 0, result.output
    assert "imported 4 records from chat.json into talk (conversation)" in result.stdout
    got = json.loads(run("get", "chat-7/D2:1", "-n", "talk", "--json").stdout)
    assert got["metadata"]["speaker"] == "Caroline" and got["kind"] == "conversation"

    several = tmp_path / "several.txt"
    several.write_text(
        json.dumps([{"id": "x", "sessions": SESSIONS[:1]}, {"id": "y", "sessions": SESSIONS[1:]}])
    )
    result = run("import", str(several), "--format", "conversation", "-n", "many", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["conversations"] == ["conversation x", "conversation y"]


def test_cli_reports_a_bad_line_and_exits_2(run: Any, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bad.jsonl", {"content": "fine"}, "{oops")
    result = run("import", str(path))
    assert result.exit_code == 2
    assert "error: erstwhile.input.invalid: bad.jsonl line 2 is not valid JSON" in result.stderr
    assert "Traceback" not in result.output

    unknown = tmp_path / "data.csv"
    unknown.write_text("a,b\n")
    result = run("import", str(unknown))
    assert result.exit_code == 2 and "--format jsonl or --format conversation" in result.stderr

    broken = tmp_path / "broken.json"
    broken.write_text('{"sessions": [')
    result = run("import", str(broken))
    assert result.exit_code == 2 and "broken.json is not valid JSON" in result.stderr

    bad_turn = tmp_path / "second.json"
    bad_turn.write_text(
        json.dumps(
            [
                {"id": "ok", "sessions": SESSIONS},
                {"id": "bad", "sessions": [{"turns": [{"text": "x"}]}]},
            ]
        )
    )
    result = run("import", str(bad_turn), "-n", "none-written")
    assert result.exit_code == 2 and "sessions[0].turns[0].speaker" in result.stderr
    result = run("search", "Caroline", "-n", "none-written", "--json")
    assert json.loads(result.stdout)["hits"] == []


def test_a_turn_is_embedded_with_the_turn_before_it_in_its_session(tmp_path: Path) -> None:
    """The vector of a turn is the mean of its content's embedding and that of the turn
    before it (same session) followed by it; content is unchanged; a session's first
    turn has its own embedding alone."""
    embedder = HashEmbedder(dimensions=64)
    sessions = [
        {"id": "1", "date": "2024-01-01", "turns": [
            {"speaker": "Ann", "text": "Where did you go?", "id": "a"},
            {"speaker": "Bob", "text": "To the lake.", "id": "b"}]},
        {"id": "2", "date": "2024-02-01", "turns": [
            {"speaker": "Ann", "text": "And then?", "id": "c"}]},
    ]  # fmt: skip
    with erstwhile.open(tmp_path / "ctx.db", embedder=embedder, background_jobs=False) as m:
        import_conversation(m, NS, sessions, conversation="conv")
        stored = {r: m.get(NS, f"conv/{r}") for r in "abc"}
        hits = m.search(NS, "lake", ranking="semantic", include_vector=True, top_k=3).hits
        vectors = {h.record.id.split("/")[1]: np.asarray(h.record.vector) for h in hits}

    def own(text: str) -> np.ndarray:
        return embedder.embed_query(text)

    assert stored["b"].content == "Bob: To the lake."
    mean = own("Bob: To the lake.") + own("Ann: Where did you go?\nBob: To the lake.")
    np.testing.assert_allclose(vectors["b"], mean / np.linalg.norm(mean), atol=1e-5)
    np.testing.assert_allclose(vectors["a"], own("Ann: Where did you go?"), atol=1e-5)
    np.testing.assert_allclose(vectors["c"], own("Ann: And then?"), atol=1e-5)  # new session

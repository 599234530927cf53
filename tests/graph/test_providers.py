"""The ``http`` and ``command`` extractors against real peers: a tiny HTTP server
speaking OpenAI-compatible /chat/completions, and a real program on stdin/stdout."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.embedding.fake_server import FakeServer

import erstwhile
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.domain.graph import ENTITY_KINDS, PREDICATES, ExtractedFact
from erstwhile.extraction.command import CommandExtractor
from erstwhile.extraction.http import HttpExtractor
from erstwhile.extraction.registry import build_extractor

ANSWER = {
    "entities": [{"name": "Ada", "kind": "person"}, {"name": "Apollo", "kind": "spaceship"}],
    "facts": [{"subject": "Ada", "predicate": "hacks on", "object": "Apollo",
               "confidence": 0.75}],
}  # fmt: skip


def chat(content: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def http_extractor(server: FakeServer) -> HttpExtractor:
    return HttpExtractor(model="tiny-llm", base_url=server.url + "/v1", max_attempts=2,
                         backoff_base=0.001)  # fmt: skip


def test_http_protocol_and_normalisation(server: FakeServer) -> None:
    server.respond = lambda request, n: (200, {}, chat(json.dumps(ANSWER)))
    with erstwhile.open(":memory:", embedder="none", background_jobs=False,
                        extractor=http_extractor(server)) as m:  # fmt: skip
        m.add("ns", "Ada hacks on Apollo, the spaceship")
        report = m.extract("ns")
        assert (report.extracted, report.extractor_id) == (1, "http:tiny-llm")
        kinds = {e.name: e.kind for e in m.entities("ns")}
        (edge,) = m.service.store.graph.relationships("ns", None, None)
    assert kinds == {"Ada": "person", "Apollo": "other"}
    assert (edge.predicate, edge.confidence) == ("related_to", 0.75)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert body["model"] == "tiny-llm" and body["temperature"] == 0
    system, user = body["messages"]
    assert user == {"role": "user", "content": "Ada hacks on Apollo, the spaceship"}
    assert all(word in system["content"] for word in (*ENTITY_KINDS, *PREDICATES))


@pytest.mark.parametrize(
    "reply",
    [
        chat("Sure! Ada works on Apollo."),  # the model chatted instead of answering JSON
        chat('["a", "list"]'),  # JSON, but not the object asked for
        {"choices": [{"message": {"content": {"entities": []}}}]},  # content not text
        {"unexpected": "shape"},  # no choices
        "<html>gateway says hi</html>",  # not JSON at all
    ],
)
def test_http_reply_that_is_not_the_json_asked_for_is_nothing_found(
    server: FakeServer, reply: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.respond = lambda request, n: (200, {}, reply)
    extractor = http_extractor(server)
    with caplog.at_level(logging.WARNING):
        found = extractor.extract("Ada works on Apollo")
    assert found.entities == () and found.facts == ()
    assert "not the JSON asked for" in caplog.text
    extractor.close()


def test_http_errors_fail_visibly(server: FakeServer) -> None:
    server.respond = lambda request, n: (500, {}, {"error": "boom"})
    with erstwhile.open(":memory:", embedder="none", background_jobs=False,
                        extractor=http_extractor(server)) as m:  # fmt: skip
        m.add("ns", "Ada works on Apollo")
        with pytest.raises(ProviderFailed):
            m.extract("ns")
        (job,) = m.service.jobs("ns")
        assert job["state"] == "failed" and "HTTP 500" in job["error"]
        assert m.service.audit("ns")["extraction_backlog"] == 1  # the next job reads it


PROGRAM = """\
import json, os, sys
request = json.load(sys.stdin)
with open(sys.argv[1], "w") as out:
    json.dump({"request": request, "env": dict(os.environ)}, out)
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
if mode == "fail":
    sys.stderr.write("no model; key=" + os.environ.get("EXTRACT_KEY", "absent") + "\\n")
    sys.exit(4)
if mode == "garbage":
    print("not json")
    sys.exit(0)
words = request["text"].split()
json.dump({"entities": [{"name": words[0]}, {"name": words[-1]}],
           "facts": [{"subject": words[0], "predicate": "uses", "object": words[-1]}]},
          sys.stdout)
"""


def command(tmp_path: Path, *extra: str, **options: Any) -> CommandExtractor:
    program = tmp_path / "extract_program.py"
    program.write_text(PROGRAM)
    argv = [sys.executable, str(program), str(tmp_path / "seen.json"), *extra]
    return CommandExtractor(argv, model="echo", **options)


def test_command_protocol_with_a_stripped_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERSTWHILE_AUTH_TOKEN", "ms-admin-token")
    monkeypatch.setenv("EXTRACT_KEY", "sk-extract-secret")
    monkeypatch.setenv("ORDINARY_SETTING", "kept")
    extractor = command(tmp_path, secret_env=["EXTRACT_KEY"])
    found = extractor.extract("Ada likes Redis")
    assert found.facts == (ExtractedFact("Ada", "uses", "Redis", 1.0),)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["request"]["text"] == "Ada likes Redis"
    assert seen["request"]["model"] == "echo"
    assert seen["request"]["vocabulary"]["predicates"] == list(PREDICATES)
    env = seen["env"]
    assert not [name for name in env if name.upper().startswith("ERSTWHILE_")]
    assert "EXTRACT_KEY" not in env and "sk-extract-secret" not in json.dumps(env)
    assert env["ORDINARY_SETTING"] == "kept"
    assert extractor.extractor_id == "command:echo"


def test_command_failures_are_provider_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProviderFailed) as error:
        command(tmp_path, "fail").extract("x y")
    assert "exit status 4" in error.value.message and "no model" in error.value.message
    with pytest.raises(ProviderFailed) as error:
        command(tmp_path, "garbage").extract("x y")
    assert "not JSON" in error.value.message
    with pytest.raises(ProviderFailed):
        CommandExtractor([str(tmp_path / "missing")]).extract("x")


def test_building_extractors_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_extractor("none")[0] is None
    assert build_extractor(None)[0] is None  # off by default
    monkeypatch.setenv("ERSTWHILE_EXTRACTOR", "heuristic")
    assert build_extractor(None)[0] is not None
    heuristic, threshold = build_extractor({"provider": "heuristic", "min_confidence": 0.9})
    assert heuristic is not None and threshold == 0.9
    with pytest.raises(InvalidInput) as error:
        build_extractor("llama")
    assert "extraction.provider" in error.value.message
    with pytest.raises(InvalidInput) as error:
        build_extractor({"provider": "command"})
    assert "extraction.command" in error.value.message
    with pytest.raises(InvalidInput) as error:
        build_extractor({"provider": "http", "api_key_env": "NOT_SET_ANYWHERE_X"})
    assert "extraction.api_key_env" in error.value.message
    with pytest.raises(InvalidInput):
        build_extractor({"provider": "heuristic", "min_confidence": 2})


def test_min_confidence_applies(server: FakeServer) -> None:
    server.respond = lambda request, n: (200, {}, chat(json.dumps(ANSWER)))
    extractor = http_extractor(server)
    assert extractor.extract("x", min_confidence=0.8).facts == ()
    assert len(extractor.extract("x", min_confidence=0.7).facts) == 1
    extractor.close()


@pytest.mark.parametrize("url", ["ftp://example.invalid", "not a url at all"])
def test_a_bad_extractor_url_names_the_extraction_setting(url: str) -> None:
    from erstwhile.extraction.http import HttpExtractor

    with pytest.raises(InvalidInput, match=r"^extraction\.base_url "):
        HttpExtractor(base_url=url)

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import CommandEmbedder, EmbedderConfig, make_embedder

# Answers [len(text), 1, is_query] per text, and records its request and environment.
PROGRAM = """\
import json, os, sys
request = json.load(sys.stdin)
with open(sys.argv[1], "w") as out:
    json.dump({"request": request, "env": dict(os.environ)}, out)
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
if mode == "fail":
    sys.stderr.write("model file missing; token=" + sys.argv[3] + "\\n")
    sys.exit(3)
if mode == "garbage":
    print("this is not json")
    sys.exit(0)
if mode == "hang":
    sys.stdin.close()
    import time
    time.sleep(30)
kind = 1.0 if request["kind"] == "query" else 0.0
json.dump({"embeddings": [[len(t), 1.0, kind] for t in request["input"]]}, sys.stdout)
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "embed_program.py"
    path.write_text(PROGRAM)
    return path


def run_record(tmp_path: Path) -> Any:
    """What the program saw on its last run: its request and its environment."""
    return json.loads((tmp_path / "record.json").read_text())


def make(program: Path, tmp_path: Path, *extra: str, **options: object) -> CommandEmbedder:
    argv = [sys.executable, str(program), str(tmp_path / "record.json"), *extra]
    return CommandEmbedder(argv, model="echo-v1", dimensions=3, **options)  # type: ignore[arg-type]


def test_protocol_and_vectors(program: Path, tmp_path: Path) -> None:
    e = make(program, tmp_path)
    vectors = e.embed_documents(["abc", "abcdefgh"])
    expected = np.array([[3, 1, 0], [8, 1, 0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert run_record(tmp_path)["request"] == {
        "input": ["abc", "abcdefgh"],
        "model": "echo-v1",
        "dimensions": 3,
        "kind": "document",
    }
    query = e.embed_query("abc")
    assert run_record(tmp_path)["request"]["kind"] == "query"
    assert query[2] > 0
    assert e.embedder_id == "command:echo-v1:3"


def test_environment_is_stripped(
    program: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERSTWHILE_CONFIG", "/etc/erstwhile.toml")
    monkeypatch.setenv("ERSTWHILE_AUTH_TOKEN", "ms-admin-token")
    monkeypatch.setenv("erstwhile_lowercase", "also ours")
    monkeypatch.setenv("EMBED_KEY", "sk-command-secret")
    monkeypatch.setenv("SAME_VALUE_ELSEWHERE", "sk-command-secret")
    monkeypatch.setenv("ORDINARY_SETTING", "kept")
    e = make(program, tmp_path, secret_env=["EMBED_KEY"])
    e.embed_documents(["x"])
    env = run_record(tmp_path)["env"]
    assert isinstance(env, dict)
    assert not [name for name in env if name.upper().startswith("ERSTWHILE_")]
    assert "EMBED_KEY" not in env and "SAME_VALUE_ELSEWHERE" not in env
    assert "sk-command-secret" not in json.dumps(env)
    assert env["ORDINARY_SETTING"] == "kept"
    assert "PATH" in env


def test_failure_exit_reports_stderr_without_secrets(
    program: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBED_KEY", "sk-command-secret")
    e = make(program, tmp_path, "fail", "sk-command-secret", secret_env=["EMBED_KEY"])
    with pytest.raises(ProviderFailed) as info:
        e.embed_documents(["x"])
    message = str(info.value)
    assert "exit status 3" in message and "model file missing" in message
    assert "sk-command-secret" not in message


def test_non_json_stdout_is_provider_failed(program: Path, tmp_path: Path) -> None:
    with pytest.raises(ProviderFailed, match="stdout is not JSON"):
        make(program, tmp_path, "garbage").embed_documents(["x"])


def test_timeout_is_provider_failed(program: Path, tmp_path: Path) -> None:
    e = make(program, tmp_path, "hang", timeout=0.5)
    with pytest.raises(ProviderFailed, match=r"no answer within 0\.5 s"):
        e.embed_documents(["x"])


def test_missing_program_is_provider_failed(tmp_path: Path) -> None:
    e = CommandEmbedder([str(tmp_path / "nope")], model="m", dimensions=3)
    with pytest.raises(ProviderFailed, match="was not found"):
        e.embed_documents(["x"])


def test_config_requires_command_model_and_dimensions(program: Path) -> None:
    with pytest.raises(InvalidInput, match=r"embedding\.command is required"):
        make_embedder(EmbedderConfig(provider="command", model="m", dimensions=3))
    with pytest.raises(InvalidInput, match=r"embedding\.dimensions"):
        make_embedder(EmbedderConfig(provider="command", command=["x"], model="m"))
    with pytest.raises(InvalidInput, match="non-empty list"):
        CommandEmbedder([], model="m", dimensions=3)

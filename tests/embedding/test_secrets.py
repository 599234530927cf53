"""A provider key never shows: not in reprs, errors, logs, nor a subprocess's environment."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path

import pytest

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import EmbedderConfig, make_embedder

from .fake_server import FakeServer, Received, openai_reply

KEY = "sk-live-TOPSECRET-0123456789"
KEY_ENV = "ACME_EMBEDDINGS_KEY"


@pytest.fixture(autouse=True)
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def config(server: FakeServer, provider: str = "openai") -> EmbedderConfig:
    return EmbedderConfig(
        provider=provider,
        model="test-embed",
        dimensions=8,
        base_url=server.url + "/v1",
        api_key_env=KEY_ENV,
        max_attempts=2,
        backoff_base=0.001,
    )


def echo_key(req: Received, n: int) -> tuple[int, dict[str, str], object]:
    # Some proxies echo request headers in their errors: the key must still not leak.
    return 500, {}, {"error": f"upstream failed for {req.headers.get('Authorization')}"}


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_key_not_in_repr_errors_or_logs(
    server: FakeServer, caplog: pytest.LogCaptureFixture, provider: str
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger: httpx and httpcore included
    server.respond = lambda req, n: (200, {}, openai_reply(req))
    embedder = make_embedder(config(server, provider))
    assert KEY not in repr(embedder) and KEY not in str(embedder)
    assert KEY not in repr(vars(embedder))
    if provider == "openai":
        embedder.embed_documents(["hello"])  # a successful call logs too
        assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"

    server.respond = echo_key
    with pytest.raises(ProviderFailed) as info:
        embedder.embed_documents(["hello"])
    assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert "upstream failed for Bearer **********" in str(info.value)
    rendered = "".join(traceback.format_exception(info.value))
    for text in (str(info.value), repr(info.value), rendered, caplog.text):
        assert KEY not in text
    assert caplog.records, "expected the retry to be logged"
    embedder.close()


def test_unset_key_variable_names_the_variable(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(InvalidInput, match=KEY_ENV):
        make_embedder(config(server))


def test_config_holds_only_the_variable_name(server: FakeServer) -> None:
    dumped = config(server).model_dump_json()
    assert KEY_ENV in dumped and KEY not in dumped


def test_command_provider_never_receives_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dump = tmp_path / "env.json"
    program = tmp_path / "embed.py"
    program.write_text(
        "import json, os, sys\n"
        "req = json.load(sys.stdin)\n"
        "open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))\n"
        "json.dump({'embeddings': [[1.0, 0.0] for _ in req['input']]}, sys.stdout)\n"
    )
    monkeypatch.setenv("ANOTHER_NAMESPACE_KEY", "sk-other-secret")
    monkeypatch.setenv("ERSTWHILE_AUTH_TOKEN", "ms-token")
    embedder = make_embedder(
        EmbedderConfig(
            provider="command",
            command=[sys.executable, str(program), str(env_dump)],
            model="echo",
            dimensions=2,
            api_key_env=KEY_ENV,
        ),
        secret_env=["ANOTHER_NAMESPACE_KEY"],
    )
    assert embedder.embed_documents(["x"]).shape == (1, 2)
    dumped = env_dump.read_text()
    assert "PATH" in json.loads(dumped)  # an ordinary environment otherwise
    for secret in (KEY, "sk-other-secret", "ms-token"):
        assert secret not in dumped

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

import erstwhile
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import (
    PROVIDERS,
    CommandEmbedder,
    Embedder,
    EmbedderConfig,
    HashEmbedder,
    LocalEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    default_embedder,
    local_available,
    make_embedder,
)

from .fakes import CountingEmbedder

SRC = str(Path(erstwhile.__file__).resolve().parents[1])


def test_every_provider_is_registered() -> None:
    assert set(PROVIDERS) == {"hash", "local", "openai", "ollama", "command"}


@pytest.mark.parametrize(
    ("config", "kind", "embedder_id"),
    [
        (EmbedderConfig(provider="hash", dimensions=64), HashEmbedder, "hash:feature-hash-v2:64"),
        (EmbedderConfig(provider="local"), LocalEmbedder, "local:all-MiniLM-L6-v2-int8:384"),
        (
            EmbedderConfig(provider="local", model="sentence-transformers/all-MiniLM-L6-v2"),
            LocalEmbedder,
            "local:all-MiniLM-L6-v2:384",
        ),
        (
            EmbedderConfig(provider="openai", model="text-embedding-3-large"),
            OpenAIEmbedder,
            "openai:text-embedding-3-large:3072",
        ),
        (EmbedderConfig(provider="OLLAMA"), OllamaEmbedder, "ollama:nomic-embed-text:768"),
        (
            EmbedderConfig(provider="command", command=["embed"], model="mine", dimensions=5),
            CommandEmbedder,
            "command:mine:5",
        ),
    ],
)
def test_make_embedder(config: EmbedderConfig, kind: type[Embedder], embedder_id: str) -> None:
    e = make_embedder(config)
    assert isinstance(e, kind)
    assert e.embedder_id == embedder_id
    assert e.max_chars == 8000 and e.batch_size == 32
    e.close()


def test_options_reach_the_embedder() -> None:
    e = make_embedder(EmbedderConfig(provider="hash", batch_size=7, max_chars=99))
    assert (e.batch_size, e.max_chars) == (7, 99)


def test_auto_and_default_pick_the_best_offline_embedder() -> None:
    expected = LocalEmbedder if local_available() else HashEmbedder
    assert isinstance(make_embedder(EmbedderConfig()), expected)
    assert isinstance(default_embedder(), expected)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match="unknown: use one of auto, command, hash"):
        make_embedder(EmbedderConfig(provider="nope"))


def test_a_provider_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def counting(config: EmbedderConfig, secret_env: frozenset[str]) -> Embedder:
        return CountingEmbedder(config.dimensions or 16)

    monkeypatch.setitem(PROVIDERS, "counting", counting)
    e = make_embedder(EmbedderConfig(provider="counting", dimensions=4))
    assert e.embedder_id == "counting:feature-hash-v2:4"


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (EmbedderConfig(provider="local", model="bge-small"), "ships all-MiniLM-L6-v2-int8"),
        (EmbedderConfig(provider="local", dimensions=128), "cannot be honoured"),
        (EmbedderConfig(provider="hash", model="other"), "feature-hash-v2"),
        (EmbedderConfig(provider="openai", model="custom"), r"embedding\.dimensions is required"),
        (
            EmbedderConfig(provider="openai", model="m", dimensions=4, base_url="not a url"),
            "base_url",
        ),
        (
            EmbedderConfig(provider="openai", api_key_env="ERSTWHILE_TEST_SURELY_UNSET_KEY"),
            "ERSTWHILE_TEST_SURELY_UNSET_KEY, which is not set",
        ),
    ],
)
def test_bad_config_is_invalid_input(config: EmbedderConfig, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        make_embedder(config)


def test_config_rejects_unknown_fields_and_bad_values() -> None:
    with pytest.raises(pydantic.ValidationError):
        EmbedderConfig(provider="hash", dimension=3)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        EmbedderConfig(provider="hash", batch_size=0)


def test_importing_embedding_stays_light() -> None:
    script = (
        "import sys; import erstwhile.embedding as e; e.LocalEmbedder(); e.default_embedder(); "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime') "
        "if m in sys.modules]; print(heavy)"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_local_without_the_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from erstwhile.embedding import local

    monkeypatch.setattr(local, "local_available", lambda model: False)
    with pytest.raises(ProviderFailed, match=r"pip install 'erstwhile\[local\]'"):
        LocalEmbedder("all-MiniLM-L6-v2").embed_query("x")
    with pytest.raises(ProviderFailed, match="its core dependencies ship this model"):
        LocalEmbedder().embed_query("x")

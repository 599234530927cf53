"""Settings: one TOML file, ``ERSTWHILE_*`` overrides, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from erstwhile.config import Settings, is_loopback, load_settings, open_memory
from erstwhile.domain.errors import InvalidInput, PolicyLimit
from erstwhile.embedding.config import EmbedderConfig
from erstwhile.service import Policy

CONFIG = """
[storage]
url = "{db}"

[server]
host = "127.0.0.1"
port = 9100

[auth]
enabled = true

[policy]
max_top_k = 20
max_records_per_upsert = 5

[embedding]
provider = "hash"
dimensions = 64
cache_size = 16

[namespaces.plain.embedding]
provider = "none"

[namespaces.wide.embedding]
provider = "hash"
dimensions = 128
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ERSTWHILE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "erstwhile.toml"
    path.write_text(CONFIG.format(db=tmp_path / "m.db"))
    return path


def test_defaults_without_any_config() -> None:
    settings = load_settings()
    assert settings.server.host == "127.0.0.1"
    assert (settings.server.port, settings.server.grpc_port) == (7077, 7078)
    assert settings.auth.enabled is True
    assert settings.storage.url is None
    assert settings.policy.caps() == Policy(
        max_top_k=1000,
        max_candidate_k=10_000,
        max_records_per_upsert=1000,
        max_content_bytes=1_000_000,
        max_max_rows=100_000,
    )


def test_file_then_environment_then_overrides(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(config)
    assert settings.server.port == 9100
    assert settings.policy.max_top_k == 20
    assert settings.embedding.dimensions == 64

    monkeypatch.setenv("ERSTWHILE_POLICY__MAX_TOP_K", "30")
    monkeypatch.setenv("ERSTWHILE_SERVER__PORT", "9200")
    settings = load_settings(config, {"server": {"port": 9300}})
    assert settings.policy.max_top_k == 30  # env over file
    assert settings.policy.max_records_per_upsert == 5  # the rest of the file stays
    assert settings.server.port == 9300  # explicit over env

    monkeypatch.setenv("ERSTWHILE_CONFIG", str(config))
    assert load_settings().embedding.cache_size == 16


def test_grpc_port_from_environment_zero_is_off_and_range_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ERSTWHILE_SERVER__GRPC_PORT", "0")
    assert load_settings().server.grpc_port == 0
    with pytest.raises(InvalidInput, match=r"config\.server\.grpc_port"):
        load_settings(None, {"server": {"grpc_port": 70000}})


def test_namespace_embedders(config: Path) -> None:
    default, overrides = load_settings(config).embedder_specs()
    assert isinstance(default, EmbedderConfig) and default.dimensions == 64
    assert overrides["plain"] == "none"
    assert isinstance(overrides["wide"], EmbedderConfig) and overrides["wide"].dimensions == 128


def test_open_memory_applies_embedders_and_caps(config: Path) -> None:
    with open_memory(load_settings(config), background_jobs=False) as memory:
        assert memory.embedder_id("other") == "hash:feature-hash-v2:64"
        assert memory.embedder_id("wide") == "hash:feature-hash-v2:128"
        assert memory.embedder_id("plain") == "none"
        with pytest.raises(PolicyLimit, match="max_top_k"):
            memory.search("other", "x", top_k=21)
        with pytest.raises(PolicyLimit, match="max_records_per_upsert"):
            memory.upsert("other", [{"content": str(i)} for i in range(6)])


def test_errors_name_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text("[server]\nprot = 1\n")
    with pytest.raises(InvalidInput, match=r"config\.server\.prot is not a known field"):
        load_settings(typo)
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\n")
    with pytest.raises(InvalidInput, match="not valid TOML"):
        load_settings(broken)
    with pytest.raises(InvalidInput, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
    bad_ns = tmp_path / "ns.toml"
    bad_ns.write_text("[namespaces.BAD.embedding]\nprovider = 'hash'\n")
    with pytest.raises(InvalidInput, match=r"namespaces\.BAD"):
        load_settings(bad_ns)
    monkeypatch.setenv("ERSTWHILE_POLICY__MAX_TOP_K", "0")
    with pytest.raises(InvalidInput, match=r"config\.policy\.max_top_k"):
        load_settings()


def test_exposure_rule() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host), host
    Settings(auth={"enabled": False}).check_exposure()  # loopback: fine
    Settings(server={"host": "0.0.0.0"}).check_exposure()  # auth on: fine
    with pytest.raises(InvalidInput, match="not a loopback address"):
        Settings(server={"host": "0.0.0.0"}, auth={"enabled": False}).check_exposure()


def test_storage_pool_and_timeouts_from_file_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pool.toml"
    path.write_text("[storage]\npool_size = 3\nstatement_timeout = 2.5\n")
    monkeypatch.setenv("ERSTWHILE_STORAGE__POOL_TIMEOUT", "7")
    options = load_settings(path).storage.options()
    assert (options.pool_size, options.pool_timeout, options.statement_timeout) == (3, 7.0, 2.5)
    with pytest.raises(InvalidInput, match=r"config\.storage\.pool_size"):
        load_settings(None, {"storage": {"pool_size": 0}})

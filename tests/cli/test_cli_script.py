"""The installed ``erstwhile`` console script, run as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripts import erstwhile_script


def test_console_script_reads_erstwhile_db_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    env = {**os.environ, "ERSTWHILE_DB": str(db), "ERSTWHILE_NAMESPACE": "agent"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [erstwhile_script(), *args], env=env, capture_output=True, text=True, timeout=60
        )

    added = run("add", "The user drives a red car", "--key", "user.car", "--json")
    assert added.returncode == 0, added.stderr
    record_id = json.loads(added.stdout)["ids"][0]
    assert db.exists()

    found = run("search", "car", "--json")
    assert found.returncode == 0, found.stderr
    assert [hit["record"]["id"] for hit in json.loads(found.stdout)["hits"]] == [record_id]
    assert json.loads(found.stdout)["hits"][0]["record"]["namespace"] == "agent"

    missing = run("get", "no-such-id")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: erstwhile.not_found: ")
    assert "Traceback" not in missing.stderr


def test_a_cli_command_imports_only_what_it_uses(tmp_path: Path) -> None:
    """Every CLI call is a cold process: the servers, the REST client, the config
    loader and the folder matcher are imported by the commands that use them, and the
    model's runtime only when something is embedded."""
    script = (
        "import sys\n"
        "from erstwhile.cli import main\n"
        f"sys.argv = ['erstwhile', '--db', {str(tmp_path / 'x.db')!r}, '--embedder', 'hash',"
        " 'add', 'hello']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('httpx', 'pydantic_settings', 'pathspec', 'fastapi', 'uvicorn', 'grpc',"
        " 'mcp', 'onnxruntime', 'torch')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"

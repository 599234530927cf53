"""The test environment installs from requirements/test.lock; a lock that no longer
matches pyproject.toml must fail the suite (and so CI), not drift silently."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "lock.py"), "--check"],
        capture_output=True,
        text=True,
    )


def test_the_lock_matches_pyproject() -> None:
    result = check(ROOT)
    assert result.returncode == 0, result.stderr


def copy(tmp_path: Path) -> Path:
    for name in ("pyproject.toml", "scripts/lock.py", "requirements/test.lock"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_a_dependency_changed_without_relocking_fails_the_check(tmp_path: Path) -> None:
    root = copy(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"numpy>=1.26"', '"numpy>=1.26,<3"'))
    result = check(root)
    assert result.returncode == 1
    assert "changed since the lock was made" in result.stderr


def test_a_pin_outside_the_declared_range_fails_the_check(tmp_path: Path) -> None:
    root = copy(tmp_path)
    lock = root / "requirements" / "test.lock"
    text = lock.read_text()
    pinned = next(line for line in text.splitlines() if line.startswith("pytest=="))
    lock.write_text(text.replace(pinned, "pytest==7.0.0"))
    result = check(root)
    assert result.returncode == 1
    assert "pytest==7.0.0 does not satisfy pytest>=8" in result.stderr


def test_a_missing_pin_fails_the_check(tmp_path: Path) -> None:
    root = copy(tmp_path)
    lock = root / "requirements" / "test.lock"
    lines = [line for line in lock.read_text().splitlines() if not line.startswith("typer==")]
    lock.write_text("\n".join(lines) + "\n")
    result = check(root)
    assert result.returncode == 1
    assert "typer is not pinned" in result.stderr

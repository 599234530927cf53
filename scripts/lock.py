"""The test environment's lock: ``requirements/test.lock`` pins every package that
``scripts/test`` (and so CI) installs, as a pip constraints file.

    python scripts/lock.py            rewrite the lock for pyproject.toml, keeping the pins
                                      it still allows (new packages get today's versions)
    python scripts/lock.py --upgrade  resolve every package to today's versions
    python scripts/lock.py --check    exit 1 unless the lock was made from pyproject.toml
                                      as it is now (tests/test_lock.py runs this)

The lock is pip-tools' ``pip-compile`` output (pip's own resolver, so it sees the local
CPU build of torch that a bare index would replace with a CUDA one), headed by a
fingerprint of pyproject.toml's dependency tables: changing a dependency without
re-locking fails the check. The package's own ranges stay honest in pyproject.toml;
only the test environment is pinned.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "test.lock"
EXTRAS = ("dev", "langgraph", "local", "postgres")
FINGERPRINT = "# pyproject-dependencies-sha256: "


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def fingerprint() -> str:
    meta = project()
    tables = {"dependencies": meta["dependencies"], "optional": meta["optional-dependencies"]}
    return hashlib.sha256(json.dumps(tables, sort_keys=True).encode()).hexdigest()


def pins(text: str) -> dict[str, Version]:
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[canonicalize_name(name)] = Version(version.split(";")[0].strip())
    return found


def problems() -> list[str]:
    if not LOCK.exists():
        return [f"{LOCK.relative_to(ROOT)} is missing: run python scripts/lock.py"]
    text = LOCK.read_text()
    wrong: list[str] = []
    if f"{FINGERPRINT}{fingerprint()}" not in text.splitlines():
        wrong.append("pyproject.toml's dependencies changed since the lock was made")
    meta, pinned = project(), pins(text)
    wanted = list(meta["dependencies"])
    for extra in EXTRAS:
        wanted += meta["optional-dependencies"][extra]
    for spec in map(Requirement, wanted):
        name = canonicalize_name(spec.name)
        if name == "erstwhile" or (spec.marker and not spec.marker.evaluate()):
            continue
        if name not in pinned:
            wrong.append(f"{spec.name} is not pinned")
        elif not spec.specifier.contains(pinned[name], prereleases=True):
            wrong.append(f"{spec.name}=={pinned[name]} does not satisfy {spec}")
    return wrong


def refresh(*, upgrade: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "test.lock"
        if LOCK.exists() and not upgrade:  # pip-compile keeps the pins of its output file
            out.write_text(LOCK.read_text())
        command = [sys.executable, "-m", "piptools", "compile", "--quiet", "--no-header"]
        command += ["--upgrade"] if upgrade else []
        command += [f"--extra={extra}" for extra in EXTRAS]
        command += ["--strip-extras", "--no-emit-index-url", "--no-emit-find-links"]
        command += ["--unsafe-package=erstwhile", "--annotation-style=line"]
        command += ["-o", str(out), str(ROOT / "pyproject.toml")]
        subprocess.run(command, check=True, cwd=ROOT)
        body = out.read_text().replace(str(ROOT), ".")
    header = (
        "# The test environment, pinned: scripts/test installs with -c this file.\n"
        "# Refresh with: python scripts/lock.py (see its docstring).\n"
        f"{FINGERPRINT}{fingerprint()}\n"
    )
    LOCK.parent.mkdir(exist_ok=True)
    LOCK.write_text(header + body)


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        wrong = problems()
        for line in wrong:
            print(f"lock: {line}", file=sys.stderr)
        return 1 if wrong else 0
    if sys.argv[1:] not in ([], ["--upgrade"]):
        print(__doc__, file=sys.stderr)
        return 2
    refresh(upgrade=sys.argv[1:] == ["--upgrade"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

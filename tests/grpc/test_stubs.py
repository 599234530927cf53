"""The committed stubs are exactly what scripts/gen-proto makes from the protos today
(ours and the earlier API's, served as an alias), and only the gRPC adapter package
imports them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "src" / "erstwhile" / "adapters" / "grpc" / "_generated"
ADAPTER = ROOT / "src" / "erstwhile" / "adapters" / "grpc"


def test_regenerating_the_stubs_changes_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-proto"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    made = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    committed = {p.name: p.read_bytes() for p in GENERATED.iterdir() if p.is_file()}
    assert set(made) == set(committed) == {
        "__init__.py", "semantic_pb2.py", "semantic_pb2.pyi", "semantic_pb2_grpc.py",
        "alias_pb2.py", "alias_pb2.pyi", "alias_pb2_grpc.py",
    }  # fmt: skip
    stale = sorted(name for name in made if made[name] != committed[name])
    assert not stale, f"{stale} differ from the proto: run python scripts/gen-proto and commit"


def test_only_the_grpc_adapter_imports_the_generated_code() -> None:
    importers = set()
    for path in (ROOT / "src").rglob("*.py"):
        if GENERATED in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any("_generated" in name or name.endswith("_pb2") for name in names):
                importers.add(path)
    assert importers and all(ADAPTER in path.parents for path in importers), importers

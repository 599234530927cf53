"""What the benchmarks share: timing summaries, logging, paths, the machine."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def latency(seconds: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "n": int(ms.shape[0]),
    }


def machine() -> dict[str, Any]:
    versions: dict[str, str] = {}
    for name in ("numpy", "chromadb", "lancedb", "sqlite_vec", "sentence_transformers", "torch"):
        try:
            module = __import__(name)
            versions[name] = str(getattr(module, "__version__", "?"))
        except ImportError:
            continue
    return {
        "cpu_count": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
    }


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def locomo_path() -> Path:
    """``$ERSTWHILE_LOCOMO``, else ``../shared/data/locomo-dev.json`` beside the repo."""
    override = os.environ.get("ERSTWHILE_LOCOMO")
    if override:
        return Path(override).expanduser()
    return REPO.parent / "shared" / "data" / "locomo-dev.json"


def size_label(size: int) -> str:
    """10000 -> "10k", 1000000 -> "1m": how result files and tables name a size."""
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def sized_study(doc: str | None, run: Callable[[int, int], dict[str, Any]], name: str) -> None:
    """The command line of a study of one store size: ``--size``, ``--seed``, ``--out``
    (default ``bench/results/<name>_<size>k.json``)."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = run(args.size, args.seed)
    log(str(result))
    write_json(args.out or RESULTS / f"{name}_{args.size // 1000}k.json", result)

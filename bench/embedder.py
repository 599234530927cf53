"""The default local model before and after its runs were grouped by token length:
``python -m bench.embedder``.

    python -m bench.embedder [--rounds 2] [--files 30] [--mine-rounds 1] [--out FILE]

Both encoders live in this process and go through the same ``LocalEmbedder`` (batches
of ``batch_size`` texts, normalisation): "before" is the encoder as it was
(``tests/support/minilm_before.py``: eight texts at a time by characters, padded to the
longest, the model file as shipped, onnxruntime's own thread count), "after" is
``erstwhile.embedding.local`` as it is. Their order alternates A B B A per round, so a
load swing on a shared machine hits both alike; figures are medians over rounds and
the ratio after / before.

- **throughput**: texts of ~16, ~64 and ~256 tokens (90-100 % of the target, counted
  with the model's tokenizer), cut from the words of git's release notes
  (``/usr/share/doc/git/RelNotes``), embedded through ``embed_documents``; texts/s.
- **mining**: ``mine`` of the first ``--files`` release notes (copied to a temporary
  folder) into a fresh SQLite store with each encoder; seconds and chunks/s.

The machine's load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.minilm_before import before_encoder

import erstwhile
from bench.common import RESULTS, log, machine, stamp, write_json
from erstwhile.embedding import LocalEmbedder
from erstwhile.embedding import local as local_module

DOCS = Path("/usr/share/doc/git/RelNotes")
LENGTHS = {16: 384, 64: 192, 256: 48}  # tokens: texts per pass
NAMESPACE = "bench"


def embedders() -> dict[str, LocalEmbedder]:
    before, after = LocalEmbedder(), LocalEmbedder()
    before._encode = before_encoder()  # the same class around the old encoder
    after._loaded()
    return {"before": before, "after": after}


def texts_of(tokens: int, count: int, words: list[str], seed: int) -> list[str]:
    """``count`` runs of consecutive words, each 90-100 % of ``tokens`` model tokens."""
    tokenizer = local_module._onnx_tokenizer()
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        start = rng.randrange(len(words) - 4 * tokens)
        size = max(tokens // 2, 1)
        while len(tokenizer.encode(" ".join(words[start : start + size])).ids) < tokens * 0.9:
            size += 1
        text = " ".join(words[start : start + size])
        if len(tokenizer.encode(text).ids) <= tokens:
            out.append(text)
    return out


def throughput(models: dict[str, LocalEmbedder], rounds: int) -> dict[str, Any]:
    words = [w for f in sorted(DOCS.glob("*.txt")) for w in f.read_text(errors="replace").split()]
    sets = {n: texts_of(n, count, words, seed=n) for n, count in LENGTHS.items()}
    for model in models.values():
        model.embed_documents(sets[16][:8])  # loaded and warm
    rates: dict[int, dict[str, list[float]]] = {n: {k: [] for k in models} for n in sets}
    for r in range(rounds):
        for name in abba(list(models), r):
            for n, texts in sets.items():
                started = time.perf_counter()
                models[name].embed_documents(texts)
                rates[n][name].append(len(texts) / (time.perf_counter() - started))
                log(f"round {r} {name} {n} tokens: {rates[n][name][-1]:.1f} texts/s")
    out = {}
    for n, by in rates.items():
        before, after = statistics.median(by["before"]), statistics.median(by["after"])
        out[f"{n}_tokens"] = {
            "texts": len(sets[n]),
            "before_texts_per_s": round(before, 1),
            "after_texts_per_s": round(after, 1),
            "ratio": round(after / before, 2),
            # each run of one encoder against the other's run at the same place of the
            # same round: the median of those ratios shrugs off a round's load swing
            "paired_ratio": round(
                statistics.median(a / b for a, b in zip(by["after"], by["before"], strict=True)),
                2,
            ),
            "before_all": [round(x, 1) for x in by["before"]],
            "after_all": [round(x, 1) for x in by["after"]],
        }
    return out


def abba(names: list[str], round_: int) -> list[str]:
    """A B B A: each round runs each twice, in mirrored order."""
    first = names if round_ % 2 == 0 else names[::-1]
    return [*first, *first[::-1]]


def mining(models: dict[str, LocalEmbedder], files: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-embedder-") as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        for f in sorted(DOCS.glob("*.txt"))[:files]:
            shutil.copy(f, folder / f.name)
        seconds: dict[str, list[float]] = {k: [] for k in models}
        chunks = 0
        # the process's first mine pays for imports and SQLite's start: not timed
        warm = Path(tmp) / "warm"
        warm.mkdir()
        shutil.copy(sorted(folder.iterdir())[0], warm)
        for name, model in models.items():
            with erstwhile.open(str(Path(tmp) / f"warm-{name}.db"), embedder=model,
                                background_jobs=False) as m:  # fmt: skip
                m.mine(NAMESPACE, warm)
        for r in range(rounds):
            for i, name in enumerate(abba(list(models), r)):
                target = str(Path(tmp) / f"mine-{r}-{i}.db")
                started = time.perf_counter()
                with erstwhile.open(target, embedder=models[name], background_jobs=False) as m:
                    report = m.mine(NAMESPACE, folder)
                seconds[name].append(time.perf_counter() - started)
                chunks = report.chunks
                log(f"round {r} {name} mine: {seconds[name][-1]:.1f} s, {chunks} chunks")
    before, after = statistics.median(seconds["before"]), statistics.median(seconds["after"])
    return {
        "folder": f"the first {files} files of {DOCS}",
        "files": files,
        "chunks": chunks,
        "before_s": round(before, 2),
        "after_s": round(after, 2),
        "before_chunks_per_s": round(chunks / before, 1),
        "after_chunks_per_s": round(chunks / after, 1),
        "ratio": round(before / after, 2),
        "before_all_s": [round(x, 2) for x in seconds["before"]],
        "after_all_s": [round(x, 2) for x in seconds["after"]],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="A B B A rounds (default 2)")
    parser.add_argument("--files", type=int, default=30, help="release notes to mine")
    parser.add_argument("--mine-rounds", type=int, default=1, help="A B B A rounds of mining")
    parser.add_argument("--out", type=Path, default=RESULTS / "embedder.json")
    args = parser.parse_args(argv)
    if not DOCS.is_dir():
        raise SystemExit(f"{DOCS} is not here: install git's documentation (apt install git)")
    load_before = machine()["loadavg"]
    models = embedders()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "when": stamp(),
        "method": "one process, A B B A per round, medians; ratio = after / before rate",
        "threads": {"after": local_module.onnx_threads(), "before": "onnxruntime's choice"},
        "token_budget": local_module._TOKEN_BUDGET,
        "batch_size": models["after"].batch_size,
        "throughput": throughput(models, args.rounds),
        "mining": mining(models, args.files, args.mine_rounds),
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["machine"] = {**machine(), "loadavg_before": load_before}
    write_json(args.out, result)
    log(f"wrote {args.out}")
    for n, row in result["throughput"].items():
        log(f"{n}: {row['before_texts_per_s']} -> {row['after_texts_per_s']} ({row['ratio']}x)")
    mined = result["mining"]
    log(f"mining: {mined['before_s']} s -> {mined['after_s']} s ({mined['ratio']}x)")


if __name__ == "__main__":
    main()

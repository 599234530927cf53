"""Real sentences from this machine, embedded once with the default model and cached
outside the repository: the data of the real-vector benchmark
(:mod:`bench.real_vectors`), which the speed bench's synthetic clusters flatter.

    python -m bench.realtext --size 100000 [--queries 300] [--cache DIR]

Sources, read in a fixed order and never downloaded: Python's standard library's
docstrings (parsed with ``ast``, nothing imported), the text files and man pages under
``/usr/share/doc`` and ``/usr/share/man`` (gzip or plain; roff requests and font escapes
dropped). Paragraphs are split into sentences; a sentence is kept when it holds 6 to 60
words and 40 to 300 characters, mostly letters, once (compared lower-cased, spaces
collapsed). The kept sentences are ordered by a digest of their text (so the corpus
does not depend on the order files are found in, and any prefix is a sample of the
whole), the first ``--queries`` are the held-out queries and the next ``--size`` the
corpus.

The cache (``--cache``, else ``$ERSTWHILE_BENCH_CACHE``, else
``~/.cache/erstwhile-bench``) holds ``real-<size>-<queries>/``: ``texts.json``,
``queries.json``, ``vectors.npy`` and ``query_vectors.npy`` (float32, unit rows) and
``meta.json`` (the embedder id, the sentences found, the seconds spent). Embedding runs
in parts of 10,000 saved as they are done (``part-*.npy``), so a build that is stopped
carries on where it was; a finished cache is reused as it is.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import os
import re
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

PART = 10_000
_ROFF_ESCAPE = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\[-&e|^]|\\s[-+]?\d|\\\*.")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_SPACES = re.compile(r"\s+")


def cache_root(given: str | None = None) -> Path:
    root = given or os.environ.get("ERSTWHILE_BENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "erstwhile-bench"


def _docstrings() -> Iterator[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts or "tests" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node)
                if text:
                    yield text


def _read_text(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if b"\x00" in raw[:4096]:
        return None
    return raw.decode("utf-8", "replace")


def _doc_files() -> Iterator[str]:
    root = Path("/usr/share/doc")
    for path in sorted(root.rglob("*")) if root.is_dir() else ():
        name = path.name.lower()
        if not path.is_file() or path.is_symlink() or name.startswith("copyright"):
            continue
        if not (name.endswith((".txt", ".md", ".rst", ".gz")) or name.startswith("readme")):
            continue
        text = _read_text(path)
        if text:
            yield text


def _man_pages() -> Iterator[str]:
    root = Path("/usr/share/man")
    for path in sorted(root.glob("man*/*")) if root.is_dir() else ():
        if not path.is_file() or path.is_symlink():
            continue
        text = _read_text(path)
        if not text:
            continue
        lines = [
            _ROFF_ESCAPE.sub("", line)
            for line in text.splitlines()
            if not line.startswith((".", "'"))
        ]
        yield "\n".join(lines)


def _sentences(text: str) -> Iterator[str]:
    for paragraph in re.split(r"\n\s*\n", text):
        joined = _SPACES.sub(" ", paragraph).strip()
        for sentence in _SENTENCE_END.split(joined):
            words = sentence.split()
            if not (6 <= len(words) <= 60 and 40 <= len(sentence) <= 300):
                continue
            letters = sum(c.isalpha() for c in sentence)
            if letters < 0.7 * len(sentence.replace(" ", "")):
                continue
            yield sentence


def _digest(sentence: str) -> bytes:
    return hashlib.blake2b(sentence.encode(), digest_size=8).digest()


def collect(limit: int, cache: Path | None = None) -> tuple[list[str], int]:
    """The first ``limit`` distinct sentences by digest, and how many were found (every
    one kept in ``cache``/sentences.json once found, for the next corpus)."""
    kept = cache / "sentences.json" if cache is not None else None
    if kept is not None and kept.exists():
        everything = json.loads(kept.read_text())
        return everything[:limit], len(everything)
    seen: dict[str, str] = {}
    for source in (_docstrings(), _doc_files(), _man_pages()):
        for text in source:
            for sentence in _sentences(text):
                folded = sentence.lower()
                if folded not in seen:
                    seen[folded] = sentence
    ordered = sorted(
        seen.values(), key=lambda s: hashlib.blake2b(s.encode(), digest_size=8).digest()
    )
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(ordered))
    return ordered[:limit], len(seen)


def build(size: int, queries: int, cache: Path) -> Path:
    """The cache folder of a corpus of ``size`` sentences and ``queries`` held-out ones,
    made (or finished) when missing."""
    from erstwhile.embedding.local import LocalEmbedder

    folder = cache / f"real-{size}-{queries}"
    if (folder / "meta.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    texts_file = folder / "all_texts.json"
    if texts_file.exists():
        chosen = json.loads(texts_file.read_text())
        found = len(chosen)
    else:
        chosen, found = collect(queries + size, cache)
        if len(chosen) < queries + size:
            raise SystemExit(f"only {len(chosen):,} distinct sentences here; ask for fewer")
        texts_file.write_text(json.dumps(chosen))
    embedder = LocalEmbedder()
    parts = []
    for number, start in enumerate(range(0, len(chosen), PART)):
        part = folder / f"part-{number:04d}.npy"
        if not part.exists():
            vectors = np.asarray(embedder.embed_documents(chosen[start : start + PART]), np.float32)
            np.save(part.with_suffix(".tmp.npy"), vectors)
            os.replace(part.with_suffix(".tmp.npy"), part)
            print(f"  embedded {min(start + PART, len(chosen)):,} of {len(chosen):,}",
                  file=sys.stderr, flush=True)  # fmt: skip
        parts.append(np.load(part))
    vectors = np.concatenate(parts)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(folder / "query_vectors.npy", vectors[:queries])
    np.save(folder / "vectors.npy", vectors[queries:])
    (folder / "queries.json").write_text(json.dumps(chosen[:queries]))
    (folder / "texts.json").write_text(json.dumps(chosen[queries:]))
    meta = {
        "embedder": embedder.embedder_id,
        "size": size,
        "queries": queries,
        "sentences_found": found,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for part in folder.glob("part-*.npy"):
        part.unlink()
    texts_file.unlink()
    return folder


def load(folder: Path) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """A built corpus: texts, vectors, query texts, query vectors."""
    return (
        json.loads((folder / "texts.json").read_text()),
        np.load(folder / "vectors.npy"),
        json.loads((folder / "queries.json").read_text()),
        np.load(folder / "query_vectors.npy"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.realtext", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--cache", help="where corpora are kept (default: ~/.cache/erstwhile-bench)"
    )
    parser.add_argument("--count", action="store_true", help="only count the distinct sentences")
    args = parser.parse_args(argv)
    if args.count:
        _, found = collect(0)
        print(found)
        return 0
    folder = build(args.size, args.queries, cache_root(args.cache))
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

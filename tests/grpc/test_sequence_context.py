"""A turn written as it happens is embedded with the turn before it in its session,
whichever interface wrote either of them: REST and gRPC against one real server (hash
embedder), turns alternating between the two."""

from __future__ import annotations

import itertools
import uuid

import numpy as np
from google.protobuf import json_format
from tests.server.harness import Server

from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.embedding import HashEmbedder

from .conftest import Rpc, Tokens

TURNS = ["Ann: Where did you go?", "Bob: To the lake.", "Ann: And then?", "Bob: We swam."]


def expected(texts: list[str]) -> list[np.ndarray]:
    embed = HashEmbedder().embed_documents
    out = [embed([texts[0]])[0]]
    for before, text in itertools.pairwise(texts):
        mixed = embed([text])[0] + embed([f"{before}\n{text}"])[0]
        out.append(mixed / np.linalg.norm(mixed))
    return out


def test_turns_written_over_rest_and_grpc_are_embedded_with_the_turn_before(
    server: Server, tokens: Tokens, writer: Rpc
) -> None:
    ns = "seq-" + uuid.uuid4().hex[:10]
    metadata = {"conversation": "c1", "session": "1"}
    with server.http(tokens.writer) as http:
        for n, text in enumerate(TURNS):
            record = {"id": f"t{n}", "content": text, "metadata": metadata,
                      "valid_from": "2024-05-01T10:00:00Z"}  # fmt: skip
            if n % 2 == 0:
                response = http.post(f"/v1/namespaces/{ns}/records", json={"records": [record]})
                assert response.status_code == 200, response.text
            else:
                message = json_format.ParseDict(record, pb.Record())
                writer.Upsert(pb.UpsertRequest(namespace=ns, records=[message]))
        found = http.post(
            f"/v1/namespaces/{ns}/search",
            json={"query": "lake", "ranking": "semantic", "top_k": 10, "include_vector": True},
        ).json()["hits"]
    vectors = {hit["record"]["id"]: np.asarray(hit["record"]["vector"]) for hit in found}
    for n, wanted in enumerate(expected(TURNS)):
        np.testing.assert_allclose(vectors[f"t{n}"], wanted, atol=1e-5, err_msg=f"t{n}")

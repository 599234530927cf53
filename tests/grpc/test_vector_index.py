"""The semantic signal's index marker over the wire: a hit the list index found says
``index = "ivf"`` in ``SemanticSignal``, one an exact search found leaves it empty,
through a real grpcio client against the real servicer on a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from tests.grpc.conftest import Rpc

import erstwhile
from erstwhile.adapters.grpc import semantic_pb2 as pb
from erstwhile.adapters.grpc.server import build_server
from erstwhile.embedding import HashEmbedder

DIMENSIONS = 16
COUNT = 60


@pytest.fixture(scope="module")
def rpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rpc]:
    path = tmp_path_factory.mktemp("grpc-index") / "m.db"
    memory = erstwhile.open(str(path), embedder=HashEmbedder(DIMENSIONS), background_jobs=False)
    vectors = memory.service.store.dialect._vectors  # type: ignore[attr-defined]
    # every scope of 20+ vectors and a fifth of the store goes through the graph
    vectors.background, vectors.min_rows, vectors.min_share = False, 20, 0.2
    server, _, executor = build_server(memory.service, auth=False, max_message_bytes=1 << 22)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield Rpc(channel, None)
    server.stop(None).wait()
    executor.shutdown()
    memory.close()


def _rows(seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(COUNT, DIMENSIONS))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_semantic_signal_names_the_index_a_hit_was_found_through(
    rpc: Rpc, tmp_path: Path
) -> None:
    rows = _rows(7)
    rpc.Upsert(pb.UpsertRequest(namespace="ns", records=[
        pb.Record(id=f"m{i}", content=f"memory {i}", vector=row.tolist(),
                  metadata={"room": "small" if i < 5 else "big"})
        for i, row in enumerate(rows)
    ]))  # fmt: skip
    query = rows[11].tolist()
    wide = rpc.Search(pb.SearchRequest(namespace="ns", query_vector=query, top_k=5,
                                       mode=pb.SEARCH_MODE_DENSE))  # fmt: skip
    assert wide.hits and wide.hits[0].record.id == "m11"
    assert {hit.signals.semantic.index for hit in wide.hits} == {"ivf"}
    assert wide.hits[0].signals.semantic.similarity == pytest.approx(1.0, abs=1e-5)
    # 5 of 60 vectors: under a fifth of the store, scored exactly, no marker
    narrow = rpc.Search(pb.SearchRequest(
        namespace="ns", query_vector=query, top_k=3, filter={"room": "small"},
        mode=pb.SEARCH_MODE_DENSE,
    ))  # fmt: skip
    assert len(narrow.hits) == 3
    assert {hit.signals.semantic.index for hit in narrow.hits} == {""}
    assert {hit.record.id for hit in narrow.hits} <= {f"m{i}" for i in range(5)}

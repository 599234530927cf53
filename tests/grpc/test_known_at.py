"""Record-time travel over gRPC: SearchRequest.known_at, HistoryRequest.known_at and
Record.known_until (new field numbers only)."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from erstwhile.adapters.grpc import semantic_pb2 as pb

from .conftest import Rpc


def test_search_and_history_as_known_then(writer: Rpc, ns: str) -> None:
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[
        pb.Record(id="g1", content="the launch is on june ten")]))  # fmt: skip
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[
        pb.Record(id="g2", content="the launch moved to june seventeen", supersedes=["g1"])
    ]))  # fmt: skip
    first = writer.History(pb.HistoryRequest(namespace=ns, id="g1")).versions[0]
    recorded = Timestamp()
    recorded.CopyFrom(first.created_at)  # g1 was recorded then and revised later
    sparse = pb.SEARCH_MODE_SPARSE
    now = writer.Search(pb.SearchRequest(namespace=ns, query_text="launch", mode=sparse))
    assert [h.record.id for h in now.hits] == ["g2"]
    then = writer.Search(
        pb.SearchRequest(namespace=ns, query_text="launch", mode=sparse, known_at=recorded)
    )
    assert [h.record.id for h in then.hits] == ["g1"]
    assert not then.hits[0].record.HasField("superseded_by")
    past = writer.History(pb.HistoryRequest(namespace=ns, id="g1", known_at=recorded))
    assert [r.id for r in past.versions] == ["g1"]
    assert past.versions[0].HasField("known_until")
    assert pb.SearchRequest.DESCRIPTOR.fields_by_name["known_at"].number == 23
    assert pb.HistoryRequest.DESCRIPTOR.fields_by_name["known_at"].number == 3
    assert pb.Record.DESCRIPTOR.fields_by_name["known_until"].number == 22


def test_history_lists_every_version_with_its_record_time_on_request(writer: Rpc, ns: str) -> None:
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="v1", content="ten")]))
    writer.Upsert(pb.UpsertRequest(namespace=ns, records=[pb.Record(id="v1", content="eleven")]))
    chain = writer.History(pb.HistoryRequest(namespace=ns, id="v1")).versions
    assert [r.version for r in chain] == [2] and not chain[0].HasField("known_until")
    every = writer.History(pb.HistoryRequest(namespace=ns, id="v1", versions=True)).versions
    assert [(r.version, r.content) for r in every] == [(1, "ten"), (2, "eleven")]
    assert every[0].known_until == every[1].updated_at
    assert not every[1].HasField("known_until")  # current: no end
    assert pb.HistoryRequest.DESCRIPTOR.fields_by_name["versions"].number == 4

"""The gRPC wire ↔ domain types: each request message becomes a domain request once.

A message is read into the same shape a JSON body has (only the fields that are
set: proto3's empty values mean "not given") and validated by the same pydantic
models as every other adapter, so a bad field gets the same message over gRPC as
over REST. Answers are built from the domain's results, field by field.

Where the API this proto keeps compatible with and erstwhile differ, the wire
follows that API: an unset ``mode`` is DENSE (erstwhile's ``semantic``), and
``include_invalidated`` is erstwhile's ``include_historical``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, ConfigDict

from erstwhile.adapters.grpc._generated import semantic_pb2 as pb
from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.records import Record, UpsertResult
from erstwhile.domain.search import (
    ExpireAction,
    ExpireRequest,
    Ranking,
    SearchRequest,
    SearchResult,
)
from erstwhile.domain.time import from_us, to_us
from erstwhile.domain.validation import parse_model

RANKING_BY_MODE: dict[int, Ranking] = {
    pb.SEARCH_MODE_UNSPECIFIED: Ranking.SEMANTIC,  # the compatible API's default
    pb.SEARCH_MODE_DENSE: Ranking.SEMANTIC,
    pb.SEARCH_MODE_SPARSE: Ranking.LEXICAL,
    pb.SEARCH_MODE_HYBRID: Ranking.HYBRID,
    pb.SEARCH_MODE_AUTO: Ranking.AUTO,
}
MODE_BY_RANKING: dict[Ranking, pb.SearchMode] = {
    Ranking.SEMANTIC: pb.SEARCH_MODE_DENSE,
    Ranking.LEXICAL: pb.SEARCH_MODE_SPARSE,
    Ranking.HYBRID: pb.SEARCH_MODE_HYBRID,
    Ranking.AUTO: pb.SEARCH_MODE_AUTO,
}
ACTION_BY_ENUM: dict[int, ExpireAction] = {
    pb.EXPIRE_ACTION_INVALIDATE: ExpireAction.INVALIDATE,
    pb.EXPIRE_ACTION_SOFT_DELETE: ExpireAction.SOFT_DELETE,
    pb.EXPIRE_ACTION_HARD_DELETE: ExpireAction.HARD_DELETE,
}
ENUM_BY_TRUST: dict[str, pb.Trust] = {
    "unverified": pb.TRUST_UNVERIFIED,
    "verified": pb.TRUST_VERIFIED,
}
TRUST_BY_ENUM: dict[int, str] = {number: name for name, number in ENUM_BY_TRUST.items()}
PREDICATE_OPS = ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN")
OP_BY_ENUM: dict[int, str] = {
    pb.PredicateOp.Value(f"PREDICATE_OP_{op}"): op for op in PREDICATE_OPS
}


class _Batch(BaseModel):
    """What an upsert carries; validated as a whole so problems are named records[i]."""

    model_config = ConfigDict(extra="forbid")

    records: list[Record]


# -- requests ------------------------------------------------------------------------


def _instant(stamp: Timestamp, field: str) -> datetime:
    """A Timestamp as an instant, to the microsecond (finer digits are dropped)."""
    try:
        return from_us(stamp.ToMicroseconds())
    except (OverflowError, ValueError):
        raise InvalidInput(
            f"{field} is out of range; give an instant between years 1 and 9999"
        ) from None


def _instants(message: Any, names: Iterable[str], data: dict[str, Any], prefix: str) -> None:
    for name in names:
        if message.HasField(name):
            data[name] = _instant(getattr(message, name), prefix + name)


def _enum_value(table: dict[int, Any], value: int, field: str, choices: str) -> Any:
    try:
        return table[value]
    except KeyError:
        raise InvalidInput(f"{field} {value} is not a known value; use one of {choices}") from None


def record_data(message: pb.Record, field: str) -> dict[str, Any]:
    """A Record message as the fields a JSON write would carry. Server-set fields
    (version, record times, trust, superseded_by, namespace) are not read: the server
    ignores them on write anyway."""
    data: dict[str, Any] = {}
    for name in ("id", "content", "payload", "source", "kind"):
        value = getattr(message, name)
        if value:
            data[name] = value
    for name in ("vector", "supersedes", "tags"):
        values = getattr(message, name)
        if values:
            data[name] = list(values)
    if message.metadata:
        data["metadata"] = dict(message.metadata)
    _instants(message, ("valid_from", "valid_to", "deleted_at"), data, field + ".")
    for name in ("if_version", "key"):
        if message.HasField(name):
            data[name] = getattr(message, name)
    if message.HasField("origin"):
        origin = message.origin
        data["origin"] = {"source": origin.source, "document": origin.document,
                          "chunk": origin.chunk}  # fmt: skip
        if origin.HasField("revision"):
            data["origin"]["revision"] = origin.revision
    return data


def records(messages: Iterable[pb.Record]) -> list[Record]:
    """An upsert's records, checked as a batch (problems are named ``records[i]``)."""
    data = [record_data(message, f"records[{i}]") for i, message in enumerate(messages)]
    return parse_model(_Batch, {"records": data}).records


def _predicates(messages: Iterable[pb.FieldPredicate]) -> list[dict[str, Any]]:
    found = []
    for index, predicate in enumerate(messages):
        op = OP_BY_ENUM.get(predicate.op)
        if op is None:
            raise InvalidInput(
                f"predicates[{index}].op is {'not set' if predicate.op == 0 else predicate.op}; "
                "use PREDICATE_OP_" + ", PREDICATE_OP_".join(PREDICATE_OPS)
            )
        found.append({"key": predicate.key, "op": op, "values": list(predicate.values)})
    return found


def _scope(message: pb.SearchRequest | pb.ExpireRequest, data: dict[str, Any]) -> None:
    """The scope options searches and expiries share: filter, predicates, tags, kind, key."""
    if message.filter:
        data["filter"] = dict(message.filter)
    if message.predicates:
        data["predicates"] = _predicates(message.predicates)
    if message.tags:
        data["tags"] = list(message.tags)
    for name in ("kind", "key"):
        if message.HasField(name):
            data[name] = getattr(message, name)


def search_request(message: pb.SearchRequest) -> SearchRequest:
    """A SearchRequest message as the domain's search (unset mode: DENSE)."""
    data: dict[str, Any] = {
        "ranking": _enum_value(
            RANKING_BY_MODE, message.mode, "mode", "SEARCH_MODE_DENSE, _SPARSE, _HYBRID or _AUTO"
        )
    }
    if message.query_text:
        data["query"] = message.query_text
    if message.query_vector:
        data["query_vector"] = list(message.query_vector)
    if message.top_k:
        data["top_k"] = message.top_k
    if message.rerank_candidate_k:
        data["candidate_k"] = message.rerank_candidate_k
    _scope(message, data)
    if message.min_trust:
        data["min_trust"] = _enum_value(
            TRUST_BY_ENUM, message.min_trust, "min_trust", "TRUST_UNVERIFIED or TRUST_VERIFIED"
        )
    _instants(message, ("as_of", "created_after", "created_before", "known_at"), data, "")
    if message.HasField("between"):
        window: dict[str, Any] = {}
        _instants(message.between, ("from", "until"), window, "between.")
        data["between"] = window
    if message.include_invalidated:
        data["include_historical"] = True
    if message.HasField("expand"):
        expand = message.expand
        data["expand"] = {k: v for k, v in (("hops", expand.hops), ("limit", expand.limit)) if v}
    for name in ("ids_only", "include_payload", "include_vector", "require_complete"):
        if getattr(message, name):
            data[name] = True
    return parse_model(SearchRequest, data)


def expire_request(message: pb.ExpireRequest) -> ExpireRequest:
    """An ExpireRequest message as the domain's expire (an empty scope needs ``all``)."""
    data: dict[str, Any] = {}
    if message.action:
        data["action"] = _enum_value(
            ACTION_BY_ENUM, message.action, "action",
            "EXPIRE_ACTION_INVALIDATE, _SOFT_DELETE or _HARD_DELETE",
        )  # fmt: skip
    if message.max_rows:
        data["max_rows"] = message.max_rows
    if message.all:
        data["all"] = True
    _scope(message, data)
    return parse_model(ExpireRequest, data)


# -- answers -------------------------------------------------------------------------


def _stamp(target: Timestamp, value: datetime) -> None:
    target.FromMicroseconds(to_us(value))


def record_message(record: Record, *, include_vector: bool = False) -> pb.Record:
    """A record as a Record message: unset optional fields stay unset."""
    message = pb.Record(
        id=record.id,
        namespace=record.namespace,
        content=record.content,
        metadata=record.metadata,
        tags=record.tags,
        kind=record.kind,
        trust=ENUM_BY_TRUST[record.trust],
        supersedes=record.supersedes,
        version=record.version or 0,
    )
    if record.payload is not None:
        message.payload = record.payload
    for name in ("source", "key", "superseded_by"):
        value = getattr(record, name)
        if value is not None:
            setattr(message, name, value)
    for name in (
        "created_at", "updated_at", "valid_from", "valid_to", "deleted_at", "known_until",
    ):  # fmt: skip
        value = getattr(record, name)
        if value is not None:
            _stamp(getattr(message, name), value)
    if record.origin is not None:
        message.origin.CopyFrom(
            pb.Origin(source=record.origin.source, document=record.origin.document,
                      chunk=record.origin.chunk, revision=record.origin.revision)
        )  # fmt: skip
    if include_vector and record.vector is not None:
        message.vector.extend(record.vector)
    return message


def _signals(signals: dict[str, dict[str, Any]]) -> pb.Signals:
    message = pb.Signals()
    if "lexical" in signals:
        lane = signals["lexical"]
        message.lexical.CopyFrom(
            pb.LexicalSignal(
                rank=int(lane["rank"]), score=lane["score"], terms=int(lane.get("terms", 0))
            )
        )
    if "semantic" in signals:
        lane = signals["semantic"]
        message.semantic.CopyFrom(
            pb.SemanticSignal(
                rank=int(lane["rank"]), similarity=lane["similarity"], index=lane.get("index", "")
            )
        )
    if "graph" in signals:
        lane = signals["graph"]
        message.graph.CopyFrom(pb.GraphSignal(hops=int(lane["hops"]), from_id=str(lane["from"])))
    return message


def search_response(result: SearchResult, *, include_vector: bool) -> pb.SearchResponse:
    """A search result as a SearchResponse (``ids_only``: each hit is its id and score)."""
    hits = []
    for hit in result.hits:
        if result.ids_only:
            hits.append(pb.Hit(record=pb.Record(id=hit.record.id), score=hit.score))
            continue
        message = pb.Hit(
            record=record_message(hit.record, include_vector=include_vector),
            score=hit.score,
            via=[pb.Via(**via) for via in hit.via],
        )
        if hit.signals:
            message.signals.CopyFrom(_signals(hit.signals))
        hits.append(message)
    return pb.SearchResponse(
        hits=hits,
        mode=MODE_BY_RANKING[result.ranking],
        unembedded=result.unembedded,
        warnings=result.warnings,
    )


def upsert_response(result: UpsertResult) -> pb.UpsertResponse:
    """An upsert's ids, versions and warnings."""
    return pb.UpsertResponse(ids=result.ids, versions=result.versions, warnings=result.warnings)


def history_known_at(message: pb.HistoryRequest) -> int | None:
    """The record time a HistoryRequest puts the chain back to, or None."""
    data: dict[str, Any] = {}
    _instants(message, ("known_at",), data, "")
    return to_us(data["known_at"]) if "known_at" in data else None


def history_min_trust(message: pb.HistoryRequest) -> str | None:
    """The trust view a HistoryRequest asks for, or None: the namespace's."""
    if not message.min_trust:
        return None
    return str(_enum_value(TRUST_BY_ENUM, message.min_trust, "min_trust",
                           "TRUST_UNVERIFIED or TRUST_VERIFIED"))  # fmt: skip


def history_response(versions: Iterable[Record]) -> pb.HistoryResponse:
    """Every version, oldest first, without vectors."""
    return pb.HistoryResponse(versions=[record_message(record) for record in versions])

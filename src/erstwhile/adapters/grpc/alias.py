"""The earlier Semantic API's service path, ``mindd.semantic.v1.Semantic``, served as an
alias of ours, so a client compiled from that API's proto calls erstwhile unchanged.

Its requests are ours on the wire (the same field numbers and types; ours only add
numbers), so each is read as our message and answered by :class:`SemanticServicer`:
the same auth, checks, errors, trailers and log line. One answer differs on the wire:
``Hit.score`` is a float there and a double here, and a float reader skips a double
(it would read 0.0), so a search's hits are rewritten into the alias's messages.
Other answers are re-read as the alias's messages byte for byte: the fields
erstwhile adds are unknown there, kept on the wire and ignored by its readers.
"""

from __future__ import annotations

import grpc

from erstwhile.adapters.grpc._generated import alias_pb2 as alias
from erstwhile.adapters.grpc._generated import alias_pb2_grpc as alias_grpc
from erstwhile.adapters.grpc._generated import semantic_pb2 as pb
from erstwhile.adapters.grpc.servicer import SemanticServicer

ALIAS_SERVICE = alias.DESCRIPTOR.services_by_name["Semantic"].full_name


def search_answer(ours: pb.SearchResponse) -> alias.SearchResponse:
    """Our search answer in the alias's messages: each hit's record as sent (fields the
    alias does not know travel as unknown fields), its score as a float."""
    return alias.SearchResponse(
        hits=[
            alias.Hit(record=alias.Record.FromString(hit.record.SerializeToString()),
                      score=hit.score)
            for hit in ours.hits
        ]
    )  # fmt: skip


class AliasServicer(alias_grpc.SemanticServicer):
    """``mindd.semantic.v1.Semantic`` on top of the servicer of ours it is given."""

    def __init__(self, ours: SemanticServicer) -> None:
        self.ours = ours

    def Upsert(
        self, request: alias.UpsertRequest, context: grpc.ServicerContext
    ) -> alias.UpsertResponse:
        ours = self.ours.Upsert(pb.UpsertRequest.FromString(request.SerializeToString()), context)
        return alias.UpsertResponse.FromString(ours.SerializeToString())

    def Search(
        self, request: alias.SearchRequest, context: grpc.ServicerContext
    ) -> alias.SearchResponse:
        ours = pb.SearchRequest.FromString(request.SerializeToString())
        return search_answer(self.ours.Search(ours, context))

    def Delete(
        self, request: alias.DeleteRequest, context: grpc.ServicerContext
    ) -> alias.DeleteResponse:
        ours = self.ours.Delete(pb.DeleteRequest.FromString(request.SerializeToString()), context)
        return alias.DeleteResponse.FromString(ours.SerializeToString())

    def Expire(
        self, request: alias.ExpireRequest, context: grpc.ServicerContext
    ) -> alias.ExpireResponse:
        ours = self.ours.Expire(pb.ExpireRequest.FromString(request.SerializeToString()), context)
        return alias.ExpireResponse.FromString(ours.SerializeToString())


def add_alias(ours: SemanticServicer, server: grpc.Server) -> None:
    """Serves the alias path on ``server``, answered by ``ours``."""
    alias_grpc.add_SemanticServicer_to_server(AliasServicer(ours), server)

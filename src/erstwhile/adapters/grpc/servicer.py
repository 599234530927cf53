"""The ``erstwhile.semantic.v1.Semantic`` servicer: metadata → caller, the caller's
capability for the call's namespace (decided before the message is read, as REST
decides it before the body), message → domain request (:mod:`.convert`), one call
through :class:`~erstwhile.access.Caller`, the answer back as a message; a
:class:`ErstwhileError` ends the call with the status of :mod:`.status` and its code
in the trailing metadata.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

import grpc

from erstwhile.access import Caller
from erstwhile.adapters.grpc import convert
from erstwhile.adapters.grpc._generated import semantic_pb2 as pb
from erstwhile.adapters.grpc._generated import semantic_pb2_grpc as pb_grpc
from erstwhile.adapters.grpc.status import ERROR_CODE_KEY, INTERNAL_CODE, details, status_of
from erstwhile.domain.auth import Capability
from erstwhile.domain.errors import ErstwhileError, Unauthenticated
from erstwhile.service import Service

log = logging.getLogger("erstwhile.grpc")

CAPABILITY_KEY = "x-erstwhile-capability"
#: the earlier API's key, accepted too so its clients need no change (alias.py)
ALIAS_CAPABILITY_KEY = "x-mindd-capability"
CAPABILITY_KEYS = (CAPABILITY_KEY, ALIAS_CAPABILITY_KEY)
SERVICE = pb.DESCRIPTOR.services_by_name["Semantic"].full_name
T = TypeVar("T")


def bearer_secret(context: grpc.ServicerContext) -> str | None:
    """The token in ``x-erstwhile-capability: Bearer <token>`` (or the earlier API's
    ``x-mindd-capability``), if the call sent one."""
    for key, value in context.invocation_metadata() or ():
        if key in CAPABILITY_KEYS and isinstance(value, str):
            scheme, _, secret = value.strip().partition(" ")
            if scheme.lower() == "bearer" and secret.strip():
                return secret.strip()
    return None


def abort(
    context: grpc.ServicerContext, status: grpc.StatusCode, code: str, message: str
) -> NoReturn:
    """Ends the call: the status, the message as its details, the code in the trailers."""
    context.set_trailing_metadata(((ERROR_CODE_KEY, code),))
    context.abort(status, details(message))
    raise AssertionError("context.abort returns only by raising")  # pragma: no cover


class SemanticServicer(pb_grpc.SemanticServicer):
    """Serves one :class:`~erstwhile.service.Service`. With ``auth`` off (loopback
    only) every call acts as ``local``, as over REST."""

    def __init__(self, service: Service, *, auth: bool) -> None:
        self.service = service
        self.access = service.access if auth else None

    def _caller(self, context: grpc.ServicerContext) -> Caller:
        if self.access is None:
            return Caller(self.service, None)
        secret = bearer_secret(context)
        if secret is None:
            raise Unauthenticated(
                f"this server needs a token: send metadata '{CAPABILITY_KEY}: Bearer <token>' "
                "(create one with `erstwhile token create`)"
            )
        return Caller(self.service, self.access.authenticate(secret))

    def _serve(
        self,
        context: grpc.ServicerContext,
        method: str,
        call: Callable[[Caller], T],
        needs: tuple[Capability, str] | None = None,
    ) -> T:
        """Runs one call as its caller, once the caller is known to hold the capability
        for the namespace (``needs``, checked before ``call`` reads the message); one
        log line per call, like REST's per request."""
        started = time.perf_counter()
        outcome, actor = "OK", None
        try:
            who = self._caller(context)
            actor = who.actor
            if needs is not None:
                who.require(*needs)
            return call(who)
        except ErstwhileError as error:
            outcome = error.code
            abort(context, status_of(error), error.code, error.message)
        except Exception:
            outcome = INTERNAL_CODE
            log.exception("unhandled error in a gRPC call")
            abort(context, grpc.StatusCode.INTERNAL, INTERNAL_CODE,
                  "internal error; the server log has the details")  # fmt: skip
        finally:
            log.info(
                "rpc",
                extra={"method": f"{SERVICE}/{method}", "outcome": outcome, "actor": actor,
                       "duration_ms": round((time.perf_counter() - started) * 1000, 3)},
            )  # fmt: skip

    def Upsert(self, request: pb.UpsertRequest, context: grpc.ServicerContext) -> pb.UpsertResponse:
        def call(who: Caller) -> pb.UpsertResponse:
            records = convert.records(request.records)
            return convert.upsert_response(who.upsert(request.namespace, records))

        return self._serve(context, "Upsert", call, (Capability.WRITE, request.namespace))

    def Search(self, request: pb.SearchRequest, context: grpc.ServicerContext) -> pb.SearchResponse:
        def call(who: Caller) -> pb.SearchResponse:
            search = convert.search_request(request)
            result = who.search(request.namespace, search)
            return convert.search_response(result, include_vector=search.include_vector)

        return self._serve(context, "Search", call, (Capability.READ, request.namespace))

    def Delete(self, request: pb.DeleteRequest, context: grpc.ServicerContext) -> pb.DeleteResponse:
        def call(who: Caller) -> pb.DeleteResponse:
            who.delete(request.namespace, request.id, hard=request.hard)
            return pb.DeleteResponse()

        return self._serve(context, "Delete", call, (Capability.WRITE, request.namespace))

    def Expire(self, request: pb.ExpireRequest, context: grpc.ServicerContext) -> pb.ExpireResponse:
        def call(who: Caller) -> pb.ExpireResponse:
            affected = who.expire(request.namespace, convert.expire_request(request))
            return pb.ExpireResponse(affected=affected)

        hard = request.action == pb.EXPIRE_ACTION_HARD_DELETE
        needs = (Capability.ADMIN if hard else Capability.WRITE, request.namespace)
        return self._serve(context, "Expire", call, needs)

    def History(
        self, request: pb.HistoryRequest, context: grpc.ServicerContext
    ) -> pb.HistoryResponse:
        def call(who: Caller) -> pb.HistoryResponse:
            known_at = convert.history_known_at(request)
            chain = who.history(
                request.namespace, request.id, known_at, versions=request.versions,
                min_trust=convert.history_min_trust(request),
            )  # fmt: skip
            return convert.history_response(chain)

        return self._serve(context, "History", call, (Capability.READ, request.namespace))

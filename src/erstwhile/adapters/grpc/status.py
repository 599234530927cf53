"""erstwhile's error codes as gRPC status codes (SPEC §13): the one table.

A failed call ends with the status below, the error's message as the status details
(a diagnostic naming the field and the fix) and the stable code in the trailing
metadata key :data:`ERROR_CODE_KEY`, so a client reacts to the code, never the text.
The details travel in a header (``grpc-message``, percent-encoded): :func:`details`
keeps them far below gRPC's metadata limits (8 KiB, past which a call may lose its
status), whatever input a message echoes.
"""

from __future__ import annotations

import grpc

from erstwhile.domain.errors import ErstwhileError

ERROR_CODE_KEY = "x-erstwhile-error-code"
INTERNAL_CODE = "erstwhile.internal"

# erstwhile.write.conflict is ABORTED rather than ALREADY_EXISTS: it covers a key held
# by another current record and a supersession that would fork a chain or revive a
# deleted record; in both the caller must re-read and change its write, which is what
# ABORTED tells a client (ALREADY_EXISTS reads as "a create of an existing id", and an
# upsert of an existing id is not an error here).
STATUS_BY_CODE: dict[str, grpc.StatusCode] = {
    "erstwhile.input.invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "erstwhile.auth.unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "erstwhile.auth.forbidden": grpc.StatusCode.PERMISSION_DENIED,
    "erstwhile.not_found": grpc.StatusCode.NOT_FOUND,
    "erstwhile.write.conflict": grpc.StatusCode.ABORTED,
    "erstwhile.write.version_conflict": grpc.StatusCode.FAILED_PRECONDITION,
    "erstwhile.policy.limit": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "erstwhile.search.semantic_unavailable": grpc.StatusCode.FAILED_PRECONDITION,
    "erstwhile.search.reindex_needed": grpc.StatusCode.FAILED_PRECONDITION,
    "erstwhile.provider.failed": grpc.StatusCode.UNAVAILABLE,
    "erstwhile.storage.unavailable": grpc.StatusCode.UNAVAILABLE,
}


def status_of(error: ErstwhileError) -> grpc.StatusCode:
    """The status a erstwhile error is sent with; INTERNAL for a code not in the table."""
    return STATUS_BY_CODE.get(error.code, grpc.StatusCode.INTERNAL)


#: The most UTF-8 bytes of a message sent as status details: percent-encoded, at most
#: three times as many bytes on the wire, beside the few of the code's trailer.
MAX_DETAILS_BYTES = 1024


def details(message: str) -> str:
    """``message`` as status details: whole when short, else cut (at a character)
    to :data:`MAX_DETAILS_BYTES` and marked with an ellipsis."""
    encoded = message.encode("utf-8")
    if len(encoded) <= MAX_DETAILS_BYTES:
        return message
    return encoded[: MAX_DETAILS_BYTES - 3].decode("utf-8", "ignore") + "…"

"""memstrata's error codes as gRPC status codes (SPEC §13): the one table.

A failed call ends with the status below, the error's message as the status details
(a diagnostic naming the field and the fix) and the stable code in the trailing
metadata key :data:`ERROR_CODE_KEY`, so a client reacts to the code, never the text.
"""

from __future__ import annotations

import grpc

from memstrata.domain.errors import MemstrataError

ERROR_CODE_KEY = "x-memstrata-error-code"
INTERNAL_CODE = "memstrata.internal"

# memstrata.write.conflict is ABORTED rather than ALREADY_EXISTS: it covers a key held
# by another current record and a supersession that would fork a chain or revive a
# deleted record; in both the caller must re-read and change its write, which is what
# ABORTED tells a client (ALREADY_EXISTS reads as "a create of an existing id", and an
# upsert of an existing id is not an error here).
STATUS_BY_CODE: dict[str, grpc.StatusCode] = {
    "memstrata.input.invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "memstrata.auth.unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "memstrata.auth.forbidden": grpc.StatusCode.PERMISSION_DENIED,
    "memstrata.not_found": grpc.StatusCode.NOT_FOUND,
    "memstrata.write.conflict": grpc.StatusCode.ABORTED,
    "memstrata.write.version_conflict": grpc.StatusCode.FAILED_PRECONDITION,
    "memstrata.policy.limit": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "memstrata.search.semantic_unavailable": grpc.StatusCode.FAILED_PRECONDITION,
    "memstrata.search.reindex_needed": grpc.StatusCode.FAILED_PRECONDITION,
    "memstrata.provider.failed": grpc.StatusCode.UNAVAILABLE,
    "memstrata.storage.unavailable": grpc.StatusCode.UNAVAILABLE,
}


def status_of(error: MemstrataError) -> grpc.StatusCode:
    """The status a memstrata error is sent with; INTERNAL for a code not in the table."""
    return STATUS_BY_CODE.get(error.code, grpc.StatusCode.INTERNAL)

"""The errors memstrata raises, each with a stable ``code`` (SPEC §13).

How a transport answers each code (an HTTP status, a gRPC status) is the adapter's:
one table per adapter (REST: :data:`memstrata.adapters.rest_models.HTTP_STATUS`;
gRPC: :data:`memstrata.adapters.grpc.status.STATUS_BY_CODE`).

    MemstrataError
     ├── InvalidInput            memstrata.input.invalid
     ├── Unauthenticated         memstrata.auth.unauthenticated
     ├── Forbidden               memstrata.auth.forbidden
     ├── NotFound                memstrata.not_found
     ├── WriteConflict           memstrata.write.conflict
     ├── VersionConflict         memstrata.write.version_conflict
     ├── PolicyLimit             memstrata.policy.limit
     ├── SemanticUnavailable     memstrata.search.semantic_unavailable
     ├── ReindexNeeded           memstrata.search.reindex_needed
     ├── ProviderFailed          memstrata.provider.failed
     └── StorageUnavailable      memstrata.storage.unavailable

The message is a diagnostic for people: it names the field and the fix. Code that
reacts to an error looks at ``code`` (or the class), never at the message.
"""

from __future__ import annotations


class MemstrataError(Exception):
    """Base of every error memstrata raises on purpose."""

    code: str = "memstrata.error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(MemstrataError):
    """The request is malformed; nothing was changed."""

    code = "memstrata.input.invalid"


class Unauthenticated(MemstrataError):
    """No token, or a token memstrata does not know."""

    code = "memstrata.auth.unauthenticated"


class Forbidden(MemstrataError):
    """The token lacks the capability or the namespace for this call."""

    code = "memstrata.auth.forbidden"


class NotFound(MemstrataError):
    """The record (or version) does not exist, or was hard-deleted."""

    code = "memstrata.not_found"


class WriteConflict(MemstrataError):
    """The write contradicts the current state (a held key, a forked chain)."""

    code = "memstrata.write.conflict"


class VersionConflict(MemstrataError):
    """An ``if_version`` precondition did not hold."""

    code = "memstrata.write.version_conflict"


class PolicyLimit(MemstrataError):
    """A configured cap was exceeded; memstrata refuses rather than truncates."""

    code = "memstrata.policy.limit"


class SemanticUnavailable(MemstrataError):
    """A semantic or hybrid search was asked for, but no vector can be had."""

    code = "memstrata.search.semantic_unavailable"


class ReindexNeeded(MemstrataError):
    """``require_complete`` was set and some in-scope records have no vector yet."""

    code = "memstrata.search.reindex_needed"


class ProviderFailed(MemstrataError):
    """An embedding or extraction provider failed or answered nonsense."""

    code = "memstrata.provider.failed"


class StorageUnavailable(MemstrataError):
    """The database cannot be used: a file that is not a database or cannot be
    opened, a server that cannot be reached. Nothing was changed."""

    code = "memstrata.storage.unavailable"


ALL_ERRORS: tuple[type[MemstrataError], ...] = (
    InvalidInput,
    Unauthenticated,
    Forbidden,
    NotFound,
    WriteConflict,
    VersionConflict,
    PolicyLimit,
    SemanticUnavailable,
    ReindexNeeded,
    ProviderFailed,
    StorageUnavailable,
)

ERRORS_BY_CODE: dict[str, type[MemstrataError]] = {cls.code: cls for cls in ALL_ERRORS}

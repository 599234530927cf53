"""The errors erstwhile raises, each with a stable ``code`` (SPEC §13).

How a transport answers each code (an HTTP status, a gRPC status) is the adapter's:
one table per adapter (REST: :data:`erstwhile.adapters.rest_models.HTTP_STATUS`;
gRPC: :data:`erstwhile.adapters.grpc.status.STATUS_BY_CODE`).

    ErstwhileError
     ├── InvalidInput            erstwhile.input.invalid
     ├── Unauthenticated         erstwhile.auth.unauthenticated
     ├── Forbidden               erstwhile.auth.forbidden
     ├── NotFound                erstwhile.not_found
     ├── WriteConflict           erstwhile.write.conflict
     ├── VersionConflict         erstwhile.write.version_conflict
     ├── PolicyLimit             erstwhile.policy.limit
     ├── SemanticUnavailable     erstwhile.search.semantic_unavailable
     ├── ReindexNeeded           erstwhile.search.reindex_needed
     ├── ProviderFailed          erstwhile.provider.failed
     └── StorageUnavailable      erstwhile.storage.unavailable

The message is a diagnostic for people: it names the field and the fix. Code that
reacts to an error looks at ``code`` (or the class), never at the message.
"""

from __future__ import annotations


class ErstwhileError(Exception):
    """Base of every error erstwhile raises on purpose."""

    code: str = "erstwhile.error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(ErstwhileError):
    """The request is malformed; nothing was changed."""

    code = "erstwhile.input.invalid"


class Unauthenticated(ErstwhileError):
    """No token, or a token erstwhile does not know."""

    code = "erstwhile.auth.unauthenticated"


class Forbidden(ErstwhileError):
    """The token lacks the capability or the namespace for this call."""

    code = "erstwhile.auth.forbidden"


class NotFound(ErstwhileError):
    """The record (or version) does not exist, or was hard-deleted."""

    code = "erstwhile.not_found"


class WriteConflict(ErstwhileError):
    """The write contradicts the current state (a held key, a forked chain)."""

    code = "erstwhile.write.conflict"


class VersionConflict(ErstwhileError):
    """An ``if_version`` precondition did not hold."""

    code = "erstwhile.write.version_conflict"


class PolicyLimit(ErstwhileError):
    """A configured cap was exceeded; erstwhile refuses rather than truncates."""

    code = "erstwhile.policy.limit"


class SemanticUnavailable(ErstwhileError):
    """A semantic or hybrid search was asked for, but no vector can be had."""

    code = "erstwhile.search.semantic_unavailable"


class ReindexNeeded(ErstwhileError):
    """``require_complete`` was set and some in-scope records have no vector yet."""

    code = "erstwhile.search.reindex_needed"


class ProviderFailed(ErstwhileError):
    """An embedding or extraction provider failed or answered nonsense."""

    code = "erstwhile.provider.failed"


class StorageUnavailable(ErstwhileError):
    """The database cannot be used: a file that is not a database or cannot be
    opened, a server that cannot be reached. Nothing was changed."""

    code = "erstwhile.storage.unavailable"


ALL_ERRORS: tuple[type[ErstwhileError], ...] = (
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

ERRORS_BY_CODE: dict[str, type[ErstwhileError]] = {cls.code: cls for cls in ALL_ERRORS}

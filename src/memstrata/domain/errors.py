"""The errors memstrata raises, each with a stable ``code`` (SPEC §13).

    MemstrataError
     ├── InvalidInput            memstrata.input.invalid            400
     ├── Unauthenticated         memstrata.auth.unauthenticated     401
     ├── Forbidden               memstrata.auth.forbidden           403
     ├── NotFound                memstrata.not_found                404
     ├── WriteConflict           memstrata.write.conflict           409
     ├── VersionConflict         memstrata.write.version_conflict   412
     ├── PolicyLimit             memstrata.policy.limit             422
     ├── SemanticUnavailable     memstrata.search.semantic_unavailable 409
     ├── ReindexNeeded           memstrata.search.reindex_needed    409
     ├── ProviderFailed          memstrata.provider.failed          502
     └── StorageUnavailable      memstrata.storage.unavailable      503

The message is a diagnostic for people: it names the field and the fix. Code that
reacts to an error looks at ``code`` (or the class), never at the message.
"""

from __future__ import annotations


class MemstrataError(Exception):
    """Base of every error memstrata raises on purpose."""

    code: str = "memstrata.error"
    http_status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(MemstrataError):
    """The request is malformed; nothing was changed."""

    code = "memstrata.input.invalid"
    http_status = 400


class Unauthenticated(MemstrataError):
    """No token, or a token memstrata does not know."""

    code = "memstrata.auth.unauthenticated"
    http_status = 401


class Forbidden(MemstrataError):
    """The token lacks the capability or the namespace for this call."""

    code = "memstrata.auth.forbidden"
    http_status = 403


class NotFound(MemstrataError):
    """The record (or version) does not exist, or was hard-deleted."""

    code = "memstrata.not_found"
    http_status = 404


class WriteConflict(MemstrataError):
    """The write contradicts the current state (a held key, a forked chain)."""

    code = "memstrata.write.conflict"
    http_status = 409


class VersionConflict(MemstrataError):
    """An ``if_version`` precondition did not hold."""

    code = "memstrata.write.version_conflict"
    http_status = 412


class PolicyLimit(MemstrataError):
    """A configured cap was exceeded; memstrata refuses rather than truncates."""

    code = "memstrata.policy.limit"
    http_status = 422


class SemanticUnavailable(MemstrataError):
    """A semantic or hybrid search was asked for, but no vector can be had."""

    code = "memstrata.search.semantic_unavailable"
    http_status = 409


class ReindexNeeded(MemstrataError):
    """``require_complete`` was set and some in-scope records have no vector yet."""

    code = "memstrata.search.reindex_needed"
    http_status = 409


class ProviderFailed(MemstrataError):
    """An embedding or extraction provider failed or answered nonsense."""

    code = "memstrata.provider.failed"
    http_status = 502


class StorageUnavailable(MemstrataError):
    """The database cannot be used: a file that is not a database or cannot be
    opened, a server that cannot be reached. Nothing was changed."""

    code = "memstrata.storage.unavailable"
    http_status = 503


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

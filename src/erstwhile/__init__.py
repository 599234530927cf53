"""erstwhile: long-term memory for AI agents.

import erstwhile
m = erstwhile.open("memory.db")
m.upsert("agent", [{"content": "The user drives a red car", "key": "user.car"}])
m.search("agent", "car").hits

``erstwhile.open`` leaves the host process's garbage collector and SQLite configuration
as they are; a process that is erstwhile's own may call ``erstwhile.tune_process()``
first (the CLI and the server do).

The same calls reach a server: ``erstwhile.Client("http://127.0.0.1:7077", token=…)``.
"""

from typing import TYPE_CHECKING, Any

from erstwhile.domain.errors import (
    ERRORS_BY_CODE,
    ErstwhileError,
    Forbidden,
    InvalidInput,
    NotFound,
    PolicyLimit,
    ProviderFailed,
    ReindexNeeded,
    SemanticUnavailable,
    StorageUnavailable,
    Unauthenticated,
    VersionConflict,
    WriteConflict,
)
from erstwhile.domain.records import Record, UpsertResult
from erstwhile.domain.search import Hit, SearchResult
from erstwhile.memory import Memory
from erstwhile.memory import open_memory as open
from erstwhile.tuning import ProcessTuning, tune_process

if TYPE_CHECKING:
    from erstwhile.adapters.client import Client


def __getattr__(name: str) -> Any:
    # The REST client brings httpx; a process that only opens a file (every CLI
    # command) should not pay for importing it.
    if name == "Client":
        from erstwhile.adapters.client import Client

        return Client
    raise AttributeError(f"module 'erstwhile' has no attribute {name!r}")


__all__ = [
    "ERRORS_BY_CODE",
    "Client",
    "ErstwhileError",
    "Forbidden",
    "Hit",
    "InvalidInput",
    "Memory",
    "NotFound",
    "PolicyLimit",
    "ProcessTuning",
    "ProviderFailed",
    "Record",
    "ReindexNeeded",
    "SearchResult",
    "SemanticUnavailable",
    "StorageUnavailable",
    "Unauthenticated",
    "UpsertResult",
    "VersionConflict",
    "WriteConflict",
    "open",
    "tune_process",
]

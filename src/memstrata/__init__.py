"""memstrata: long-term memory for AI agents.

import memstrata
m = memstrata.open("memory.db")
m.upsert("agent", [{"content": "The user drives a red car", "key": "user.car"}])
m.search("agent", "car").hits

The same calls reach a server: ``memstrata.Client("http://127.0.0.1:7077", token=…)``.
"""

from typing import TYPE_CHECKING, Any

from memstrata.domain.errors import (
    ERRORS_BY_CODE,
    Forbidden,
    InvalidInput,
    MemstrataError,
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
from memstrata.domain.records import Record, UpsertResult
from memstrata.domain.search import Hit, SearchResult
from memstrata.memory import Memory
from memstrata.memory import open_memory as open

if TYPE_CHECKING:
    from memstrata.adapters.client import Client


def __getattr__(name: str) -> Any:
    # The REST client brings httpx; a process that only opens a file (every CLI
    # command) should not pay for importing it.
    if name == "Client":
        from memstrata.adapters.client import Client

        return Client
    raise AttributeError(f"module 'memstrata' has no attribute {name!r}")


__all__ = [
    "ERRORS_BY_CODE",
    "Client",
    "Forbidden",
    "Hit",
    "InvalidInput",
    "Memory",
    "MemstrataError",
    "NotFound",
    "PolicyLimit",
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
]

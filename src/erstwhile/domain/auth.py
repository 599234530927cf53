"""Tokens and capabilities (SPEC §11): who may read, write or administer which namespaces.

A token's secret is shown once at creation and stored only as its SHA-256 digest;
the digest of a high-entropy random secret needs no salt or slow hash to resist
guessing.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from enum import StrEnum

from erstwhile.domain.errors import Forbidden
from erstwhile.domain.validation import quoted

TOKEN_PREFIX = "mst_"


class Capability(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


@dataclass(frozen=True)
class Token:
    """A stored token: never the secret, only its digest."""

    id: str
    name: str
    digest: str
    capabilities: frozenset[Capability]
    namespaces: frozenset[str] = field(default_factory=frozenset)  # empty = every namespace
    disabled: bool = False
    created_at: int = 0

    def allows(self, capability: Capability, namespace: str | None = None) -> bool:
        if self.disabled or capability not in self.capabilities:
            return False
        return namespace is None or not self.namespaces or namespace in self.namespaces

    def require(self, capability: Capability, namespace: str | None = None) -> None:
        if capability not in self.capabilities:
            raise Forbidden(f"this token lacks the {capability.value!r} capability")
        if namespace is not None and self.namespaces and namespace not in self.namespaces:
            raise Forbidden(f"this token is not allowed in namespace {quoted(namespace)}")


def new_secret() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def capabilities_for(*, read_only: bool, admin: bool) -> frozenset[Capability]:
    if read_only:
        return frozenset({Capability.READ})
    base = {Capability.READ, Capability.WRITE}
    if admin:
        base.add(Capability.ADMIN)
    return frozenset(base)

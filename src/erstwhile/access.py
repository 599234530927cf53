"""Who may do what (SPEC §11): tokens, and the capability checks in front of the service.

A token carries capabilities (``read``, ``write``, ``admin``) and an optional namespace
scope. Its secret is printed once at creation; the store keeps only its digest.

An adapter turns a request's secret into a :class:`Token` with :meth:`Access.authenticate`
(or runs without auth, on loopback only) and calls the service through a
:class:`Caller`, which checks the capability and namespace before every call and
writes the token id to the ledger as the actor:

    reads  (search, get, history, ledger, namespaces, audit,
            entities, relationships, mentions)             read
    writes (upsert, supersede, invalidate, delete,
            set_embedding, expire, facts, mentions)        write
    verify, expire with hard_delete, jobs, tokens          admin
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from erstwhile.domain.auth import Capability, Token
from erstwhile.domain.errors import Forbidden
from erstwhile.domain.graph import Entity, Mention, Relationship
from erstwhile.domain.ledger import ChangesPage, LedgerEntry
from erstwhile.domain.records import Record, UpsertResult
from erstwhile.domain.search import ExpireAction, ExpireRequest, SearchRequest, SearchResult
from erstwhile.extraction.usage import Budget
from erstwhile.jobs.mining import MineRequest
from erstwhile.service import LOCAL_ACTOR, Service
from erstwhile.service_graph import NameLike
from erstwhile.tokens import TOKEN_ID_PREFIX, Access

__all__ = ["TOKEN_ID_PREFIX", "Access", "Caller"]


class Caller:
    """The service as one caller may use it: each method checks the token's capability
    and namespace scope, then calls the service with the token id as the actor.

    ``token=None`` is a caller on a server without auth (loopback only): everything is
    allowed and the actor is ``local``."""

    def __init__(self, service: Service, token: Token | None) -> None:
        self.service = service
        self.token = token

    @property
    def actor(self) -> str:
        return self.token.id if self.token is not None else LOCAL_ACTOR

    def require(self, capability: Capability, namespace: str | None = None) -> None:
        if self.token is not None:
            self.token.require(capability, namespace)

    def visible(self, namespace: str) -> bool:
        return self.token is None or not self.token.namespaces or namespace in self.token.namespaces

    # -- reads ----------------------------------------------------------------

    def search(self, namespace: str, request: SearchRequest) -> SearchResult:
        self.require(Capability.READ, namespace)
        return self.service.search(namespace, request)

    def get(
        self,
        namespace: str,
        record_id: str,
        version: int | None = None,
        known_at: int | None = None,
        *,
        min_trust: str | None = None,
    ) -> Record:
        self.require(Capability.READ, namespace)
        return self.service.get(namespace, record_id, version, known_at, min_trust=min_trust)

    def history(
        self,
        namespace: str,
        record_id: str,
        known_at: int | None = None,
        *,
        versions: bool = False,
        min_trust: str | None = None,
    ) -> list[Record]:
        self.require(Capability.READ, namespace)
        return self.service.history(
            namespace, record_id, known_at, versions=versions, min_trust=min_trust
        )

    def changes(
        self, namespace: str, since: int, until: int | None, *, after: int | None, limit: int
    ) -> ChangesPage:
        self.require(Capability.READ, namespace)
        return self.service.changes(namespace, since, until, after=after, limit=limit)

    def ledger(self, namespace: str, record_id: str) -> list[LedgerEntry]:
        self.require(Capability.READ, namespace)
        return self.service.ledger(namespace, record_id)

    def namespaces(self) -> list[str]:
        """The namespaces this caller may see."""
        self.require(Capability.READ)
        return [ns for ns in self.service.namespaces() if self.visible(ns)]

    def audit(self, namespace: str) -> dict[str, Any]:
        self.require(Capability.READ, namespace)
        return self.service.audit(namespace)

    def entities(
        self, namespace: str, q: str | None = None, *, kind: str | None = None, limit: int = 100
    ) -> list[Entity]:
        self.require(Capability.READ, namespace)
        return self.service.entities(namespace, q, kind=kind, limit=limit)

    def entity(self, namespace: str, entity_id: str) -> dict[str, Any]:
        self.require(Capability.READ, namespace)
        return self.service.entity(namespace, entity_id)

    def relationships(
        self,
        namespace: str,
        entity_id: str,
        *,
        include_expired: bool = False,
        as_of: int | None = None,
    ) -> list[Relationship]:
        self.require(Capability.READ, namespace)
        return self.service.relationships(
            namespace, entity_id, include_expired=include_expired, as_of=as_of
        )

    def mentions(self, namespace: str, entity_id: str) -> list[Mention]:
        self.require(Capability.READ, namespace)
        return self.service.mentions(namespace, entity_id)

    # -- writes ---------------------------------------------------------------

    def upsert(self, namespace: str, records: Sequence[Record]) -> UpsertResult:
        self.require(Capability.WRITE, namespace)
        return self.service.upsert(namespace, records, actor=self.actor)

    def supersede(self, namespace: str, old_id: str, record: Record) -> UpsertResult:
        self.require(Capability.WRITE, namespace)
        return self.service.supersede(namespace, old_id, record, actor=self.actor)

    def invalidate(self, namespace: str, record_id: str, at: int | None = None) -> int:
        self.require(Capability.WRITE, namespace)
        return self.service.invalidate(namespace, record_id, at, actor=self.actor)

    def delete(self, namespace: str, record_id: str, *, hard: bool = False) -> None:
        self.require(Capability.WRITE, namespace)
        self.service.delete(namespace, record_id, hard=hard, actor=self.actor)

    def set_embedding(self, namespace: str, record_id: str, vector: list[float]) -> None:
        self.require(Capability.WRITE, namespace)
        self.service.set_embedding(namespace, record_id, vector, actor=self.actor)

    def expire(self, namespace: str, request: ExpireRequest) -> int:
        self.require(Capability.WRITE, namespace)
        if request.action == ExpireAction.HARD_DELETE:
            self.require(Capability.ADMIN, namespace)
        return self.service.expire(namespace, request, actor=self.actor)

    def assert_fact(
        self,
        namespace: str,
        subject: NameLike,
        predicate: str,
        object: NameLike,
        valid_from: int | None = None,
    ) -> Relationship:
        self.require(Capability.WRITE, namespace)
        return self.service.assert_fact(namespace, subject, predicate, object, valid_from)

    def mention(
        self, namespace: str, record_id: str, entities: Sequence[NameLike]
    ) -> list[Mention]:
        self.require(Capability.WRITE, namespace)
        return self.service.mention(namespace, record_id, entities)

    def verify(self, namespace: str, record_id: str, reviewer: str) -> int:
        self.require(Capability.ADMIN, namespace)
        return self.service.verify(namespace, record_id, reviewer, actor=self.actor)

    # -- jobs -----------------------------------------------------------------

    def start_job(
        self,
        job_type: str,
        namespace: str,
        mine: MineRequest | None = None,
        budget: Budget | None = None,
    ) -> dict[str, Any]:
        """Starts a job (admin): a ``mine`` job reads a folder on the server's machine;
        an ``extract`` job keeps to ``budget``."""
        self.require(Capability.ADMIN, namespace)
        job_id = self.service.start_job(job_type, namespace, mine, actor=self.actor,
                                        budget=budget)  # fmt: skip
        return self.service.job(job_id)

    def job(self, job_id: int) -> dict[str, Any]:
        self.require(Capability.ADMIN)
        job = self.service.job(job_id)
        if not self.visible(job["namespace"]):
            raise Forbidden(f"this token is not allowed in namespace {job['namespace']!r}")
        return job

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        self.require(Capability.ADMIN, namespace)
        return [job for job in self.service.jobs(namespace) if self.visible(job["namespace"])]

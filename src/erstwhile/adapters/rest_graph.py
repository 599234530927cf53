"""The REST routes of the knowledge graph (SPEC §10): asserted facts and mentions,
and reading entities, their relationships and the records that mention them.

Same pattern as :mod:`erstwhile.adapters.rest_routes`: parse the body once, call the
service through the caller, render the domain answer with its ``to_json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from erstwhile.adapters.rest_models import (
    ERROR_RESPONSES,
    EntityRef,
    FactBody,
    MentionsBody,
    body_schema,
    parse_body,
)
from erstwhile.adapters.rest_routes import CallerDep, Namespace, RecordId, WriteBody
from erstwhile.domain.time import parse_instant, to_us

GRAPH_TAG = "graph"

EntityId = Annotated[str, Path(alias="entity", description="An entity id (ent_…)")]


class EntityOut(BaseModel):
    id: str
    name: str
    kind: str
    aliases: list[str]
    possibly_same_as: list[str] = Field(default_factory=list)


class EntityList(BaseModel):
    entities: list[EntityOut]


class RelationshipOut(BaseModel):
    id: str
    subject: str
    predicate: str
    object: str
    valid_from: str
    valid_to: str | None = Field(default=None, description="Absent while the fact holds.")
    confidence: float
    provenance: dict[str, Any] | None = Field(
        default=None, description="{record, origin, job, extractor}; absent when asserted."
    )


class RelationshipList(BaseModel):
    relationships: list[RelationshipOut]


class MentionOut(BaseModel):
    record: str
    entity: str
    spelling: str
    provenance: dict[str, Any] | None = None


class MentionList(BaseModel):
    mentions: list[MentionOut]


def _name(value: str | EntityRef) -> str | dict[str, Any]:
    return value if isinstance(value, str) else value.spec()


graph_router = APIRouter(tags=[GRAPH_TAG], responses=ERROR_RESPONSES)


@graph_router.post(
    "/v1/namespaces/{ns}/facts",
    status_code=201,
    response_model=RelationshipOut,
    openapi_extra=body_schema(FactBody),
    summary="Assert a relationship between two entities",
)
def assert_fact(ns: Namespace, raw: WriteBody, who: CallerDep) -> Response:
    body = parse_body(FactBody, raw)
    start = None if body.valid_from is None else to_us(body.valid_from)
    edge = who.assert_fact(ns, _name(body.subject), body.predicate, _name(body.object), start)
    return JSONResponse(edge.to_json(), status_code=201)


@graph_router.post(
    "/v1/namespaces/{ns}/records/{id}/mentions",
    response_model=MentionList,
    openapi_extra=body_schema(MentionsBody),
    summary="Assert the entities a record mentions",
)
def mention(ns: Namespace, rid: RecordId, raw: WriteBody, who: CallerDep) -> Response:
    body = parse_body(MentionsBody, raw)
    found = who.mention(ns, rid, [e.spec() for e in body.entities])
    return JSONResponse({"mentions": [m.to_json() for m in found]})


@graph_router.get(
    "/v1/namespaces/{ns}/entities",
    response_model=EntityList,
    summary="Entities, by part of a name or alias and by kind",
)
def entities(
    ns: Namespace,
    who: CallerDep,
    q: Annotated[str | None, Query(description="Part of a name or alias, any case")] = None,
    kind: Annotated[str | None, Query(description="Only this kind")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    found = who.entities(ns, q, kind=kind, limit=limit)
    return JSONResponse({"entities": [e.to_json() for e in found]})


@graph_router.get(
    "/v1/namespaces/{ns}/entities/{entity}",
    response_model=EntityOut,
    summary="One entity, with what it may be the same as",
)
def entity(ns: Namespace, entity_id: EntityId, who: CallerDep) -> Response:
    return JSONResponse(who.entity(ns, entity_id))


@graph_router.get(
    "/v1/namespaces/{ns}/entities/{entity}/relationships",
    response_model=RelationshipList,
    summary="An entity's relationships valid now, at as_of, or ever",
)
def relationships(
    ns: Namespace,
    entity_id: EntityId,
    who: CallerDep,
    include_expired: Annotated[bool, Query(description="Retracted facts too")] = False,
    as_of: Annotated[str | None, Query(description="Valid at this instant")] = None,
) -> Response:
    at = None if as_of is None else parse_instant(as_of, "as_of")
    found = who.relationships(ns, entity_id, include_expired=include_expired, as_of=at)
    return JSONResponse({"relationships": [edge.to_json() for edge in found]})


@graph_router.get(
    "/v1/namespaces/{ns}/entities/{entity}/mentions",
    response_model=MentionList,
    summary="The records that mention an entity, with their own spelling",
)
def mentions(ns: Namespace, entity_id: EntityId, who: CallerDep) -> Response:
    return JSONResponse({"mentions": [m.to_json() for m in who.mentions(ns, entity_id)]})

"""What a search asks for and what it answers (SPEC §6)."""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)

from erstwhile.domain.records import Instant, MetadataValue, Record, Trust
from erstwhile.domain.time import Window, now_us, to_us
from erstwhile.domain.validation import bounded_query, capped, quoted
from erstwhile.domain.vectors import MAX_COUNT, vector_problem


class Ranking(StrEnum):
    AUTO = "auto"
    LEXICAL = "lexical"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class Op(StrEnum):
    EQ = "EQ"
    NEQ = "NEQ"
    GT = "GT"
    GTE = "GTE"
    LT = "LT"
    LTE = "LTE"
    IN = "IN"


NUMERIC_OPS = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    """The number a metadata value spells, or None. Stricter than float(): no
    '1_000', 'nan', 'inf' or padding, so every backend agrees on what is numeric."""
    if not _NUMBER.match(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class Predicate(BaseModel):
    """A typed condition on one metadata key. EQ/NEQ/IN compare text, the rest numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=1)
    op: Annotated[Op, BeforeValidator(_upper)]
    values: list[MetadataValue] = Field(min_length=1)

    @model_validator(mode="after")
    def _values_fit_op(self) -> Predicate:
        if self.op != Op.IN and len(self.values) != 1:
            raise ValueError(f"{self.op.value} takes exactly one value, got {len(self.values)}")
        if self.op in NUMERIC_OPS:
            for value in self.values:
                if parse_number(value) is None:
                    raise ValueError(
                        f"{self.op.value} compares numbers; {quoted(value)} is not a number "
                        "(write it like 3, -2.5 or 1e3)"
                    )
        return self

    def number(self) -> float:
        number = parse_number(self.values[0])
        assert number is not None  # checked at validation
        return number


_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The plain words of a query, in order, once each. Query syntax is just text."""
    return list(dict.fromkeys(_WORD.findall(text)))


def _lower_kind(kind: str | None) -> str | None:
    return kind.strip().lower() if kind is not None else None


KindScope = Annotated[str | None, AfterValidator(_lower_kind)]
"""A kind to scope by, compared as stored: trimmed and lower case."""

# A scope's lists, counted before an item is read (erstwhile.domain.validation caps)
ScopeTags = Annotated[list[str], BeforeValidator(capped("tags", scope=True))]
ScopeFilter = Annotated[dict[str, MetadataValue], BeforeValidator(capped("filter", scope=True))]
ScopePredicates = Annotated[list[Predicate], BeforeValidator(capped("predicates", scope=True))]


def between_option(start: Any, end: Any) -> dict[str, Any] | None:
    """The ``between`` option of a period given as two separate options (``from`` and
    ``until``, either None), or None when neither is. One end alone is still passed,
    so the request's own error names the missing one."""
    if start is None and end is None:
        return None
    window = {"from": start, "until": end}
    return {name: at for name, at in window.items() if at is not None}


class Between(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: Instant = Field(alias="from")
    until: Instant

    @model_validator(mode="before")
    @classmethod
    def _both_ends(cls, data: Any) -> Any:
        if isinstance(data, list | tuple) and len(data) == 2:
            return {"from": data[0], "until": data[1]}
        if isinstance(data, dict):
            has_from = "from" in data or "from_" in data
            if has_from and "until" not in data:
                raise ValueError("until is missing: a window needs both from and until")
            if "until" in data and not has_from:
                raise ValueError("from is missing: a window needs both from and until")
        return data

    @model_validator(mode="after")
    def _not_empty(self) -> Between:
        if self.from_ >= self.until:
            raise ValueError("from must be earlier than until (the window is empty or reversed)")
        return self


class Expand(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hops: int = Field(default=1, ge=1, le=3)
    limit: int = Field(default=10, ge=1, le=MAX_COUNT)


class SearchRequest(BaseModel):
    """One search. Exactly one of ``query`` and ``query_vector``; at most one time option."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: Annotated[str | None, BeforeValidator(bounded_query)] = None
    query_vector: list[float] | None = None
    top_k: int = Field(default=10, ge=1, le=MAX_COUNT)
    ranking: Ranking = Ranking.AUTO
    candidate_k: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    kind: KindScope = None
    tags: ScopeTags = Field(default_factory=list)
    key: str | None = None
    filter: ScopeFilter = Field(default_factory=dict)
    predicates: ScopePredicates = Field(default_factory=list)
    created_after: Instant | None = None
    created_before: Instant | None = None
    min_trust: Trust | None = None
    as_of: Instant | None = None
    between: Between | None = None
    include_historical: bool = False
    known_at: Instant | None = None
    expand: bool | Expand = False
    ids_only: bool = False
    include_payload: bool = False
    include_vector: bool = False
    require_complete: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> SearchRequest:
        if (self.query is None) == (self.query_vector is None):
            raise ValueError("give exactly one of query and query_vector")
        if self.query_vector is not None:
            problem = vector_problem(self.query_vector)
            if problem is not None:
                raise ValueError(f"query_vector {problem}")
            if self.ranking in (Ranking.LEXICAL, Ranking.HYBRID):
                raise ValueError(
                    f"ranking {self.ranking.value} needs query text for the lexical lane; "
                    "use ranking semantic (or auto) with query_vector"
                )
        chosen = [
            name
            for name, on in (
                ("as_of", self.as_of is not None),
                ("between", self.between is not None),
                ("include_historical", self.include_historical),
            )
            if on
        ]
        if len(chosen) > 1:
            raise ValueError(f"{' and '.join(chosen)} are mutually exclusive; choose one")
        return self

    def known_at_us(self) -> int | None:
        """The record time the search is put back to (``known_at``), or None: now."""
        return to_us(self.known_at) if self.known_at is not None else None

    def window(self, now: int | None = None) -> Window | None:
        """The validity window asked about; ``None`` means every record, ever. A
        current search put back to ``known_at`` asks about validity at that instant
        (the answer erstwhile would have given then)."""
        known_at = self.known_at_us()
        if known_at is not None:
            now = known_at
        if self.include_historical:
            return None
        if self.as_of is not None:
            return Window.point(to_us(self.as_of))
        if self.between is not None:
            return Window.between(to_us(self.between.from_), to_us(self.between.until))
        return Window.point(now if now is not None else now_us())

    def record_terms(self) -> list[tuple[str, str, Any]]:
        """The scope terms on a record's own columns, as (column, operator, value):
        kind, creation time and trust. Each backend writes them in its SQL."""
        terms: list[tuple[str, str, Any]] = []
        if self.kind is not None:
            terms.append(("kind", "=", self.kind))
        if self.created_after is not None:
            terms.append(("created_at", ">", to_us(self.created_after)))
        if self.created_before is not None:
            terms.append(("created_at", "<", to_us(self.created_before)))
        if self.min_trust == "verified":
            terms.append(("trust", "=", "verified"))
        return terms

    def lane_depth(self) -> int:
        """How deep each lane reads before fusion."""
        return self.candidate_k or max(50, 5 * self.top_k)


class Hit(BaseModel):
    record: Record
    score: float
    signals: dict[str, dict[str, float | int | str]] = Field(default_factory=dict)
    via: list[dict[str, str]] = Field(default_factory=list)

    def to_json(self, *, include_vector: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "record": self.record.to_json(include_vector=include_vector),
            "score": self.score,
        }
        if self.signals:
            data["signals"] = self.signals
        if self.via:
            data["via"] = self.via
        return data


class SearchResult(BaseModel):
    hits: list[Hit]
    ranking: Ranking
    unembedded: int = 0
    warnings: list[str] = Field(default_factory=list)
    ids_only: bool = Field(default=False, exclude=True)

    def to_json(self, *, include_vector: bool = False) -> dict[str, Any]:
        if self.ids_only:
            hits = [{"record": {"id": h.record.id}, "score": h.score} for h in self.hits]
        else:
            hits = [hit.to_json(include_vector=include_vector) for hit in self.hits]
        return {
            "hits": hits,
            "ranking": self.ranking.value,
            "unembedded": self.unembedded,
            "warnings": self.warnings,
        }

    def ids(self) -> list[str]:
        return [hit.record.id for hit in self.hits]


class ExpireAction(StrEnum):
    INVALIDATE = "invalidate"
    SOFT_DELETE = "soft_delete"
    HARD_DELETE = "hard_delete"


class ExpireRequest(BaseModel):
    """One bounded expire. Its scope takes the search's scope options (kind, tags, key,
    filter, predicates); an empty scope would take every record, so it must be asked
    for with ``all=True`` rather than happen because a filter was forgotten."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: KindScope = None
    tags: ScopeTags = Field(default_factory=list)
    key: str | None = None
    filter: ScopeFilter = Field(default_factory=dict)
    predicates: ScopePredicates = Field(default_factory=list)
    all: bool = False
    action: ExpireAction
    max_rows: int = Field(gt=0, le=MAX_COUNT)

    @model_validator(mode="after")
    def _scoped(self) -> ExpireRequest:
        scoped = self.has_scope()
        if not scoped and not self.all:
            raise ValueError(
                "no scope given, so every record of the namespace would be affected; "
                "narrow it with kind, tags, key, filter or predicates, or pass all=true "
                "(--all on the command line)"
            )
        if scoped and self.all:
            raise ValueError("all=true takes every record; drop it or drop the scope")
        return self

    def has_scope(self) -> bool:
        return bool(
            self.kind is not None
            or self.tags
            or self.key is not None
            or self.filter
            or self.predicates
        )

    def record_terms(self) -> list[tuple[str, str, Any]]:
        """The scope terms on a record's own columns (kind, key), as in a search."""
        terms: list[tuple[str, str, Any]] = []
        if self.kind is not None:
            terms.append(("kind", "=", self.kind))
        if self.key is not None:
            terms.append(("key", "=", self.key))
        return terms

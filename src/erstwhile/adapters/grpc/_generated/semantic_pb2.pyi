import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Trust(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRUST_UNSPECIFIED: _ClassVar[Trust]
    TRUST_UNVERIFIED: _ClassVar[Trust]
    TRUST_VERIFIED: _ClassVar[Trust]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_SPARSE: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_AUTO: _ClassVar[SearchMode]

class PredicateOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREDICATE_OP_UNSPECIFIED: _ClassVar[PredicateOp]
    PREDICATE_OP_EQ: _ClassVar[PredicateOp]
    PREDICATE_OP_NEQ: _ClassVar[PredicateOp]
    PREDICATE_OP_GT: _ClassVar[PredicateOp]
    PREDICATE_OP_GTE: _ClassVar[PredicateOp]
    PREDICATE_OP_LT: _ClassVar[PredicateOp]
    PREDICATE_OP_LTE: _ClassVar[PredicateOp]
    PREDICATE_OP_IN: _ClassVar[PredicateOp]

class ExpireAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXPIRE_ACTION_UNSPECIFIED: _ClassVar[ExpireAction]
    EXPIRE_ACTION_INVALIDATE: _ClassVar[ExpireAction]
    EXPIRE_ACTION_SOFT_DELETE: _ClassVar[ExpireAction]
    EXPIRE_ACTION_HARD_DELETE: _ClassVar[ExpireAction]
TRUST_UNSPECIFIED: Trust
TRUST_UNVERIFIED: Trust
TRUST_VERIFIED: Trust
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_SPARSE: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_AUTO: SearchMode
PREDICATE_OP_UNSPECIFIED: PredicateOp
PREDICATE_OP_EQ: PredicateOp
PREDICATE_OP_NEQ: PredicateOp
PREDICATE_OP_GT: PredicateOp
PREDICATE_OP_GTE: PredicateOp
PREDICATE_OP_LT: PredicateOp
PREDICATE_OP_LTE: PredicateOp
PREDICATE_OP_IN: PredicateOp
EXPIRE_ACTION_UNSPECIFIED: ExpireAction
EXPIRE_ACTION_INVALIDATE: ExpireAction
EXPIRE_ACTION_SOFT_DELETE: ExpireAction
EXPIRE_ACTION_HARD_DELETE: ExpireAction

class Record(_message.Message):
    __slots__ = ("id", "content", "payload", "vector", "metadata", "created_at", "valid_from", "valid_to", "deleted_at", "supersedes", "source", "version", "if_version", "namespace", "tags", "kind", "key", "trust", "origin", "updated_at", "superseded_by", "known_until")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    DELETED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    IF_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    KNOWN_UNTIL_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: str
    payload: bytes
    vector: _containers.RepeatedScalarFieldContainer[float]
    metadata: _containers.ScalarMap[str, str]
    created_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    deleted_at: _timestamp_pb2.Timestamp
    supersedes: _containers.RepeatedScalarFieldContainer[str]
    source: str
    version: int
    if_version: int
    namespace: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    key: str
    trust: Trust
    origin: Origin
    updated_at: _timestamp_pb2.Timestamp
    superseded_by: str
    known_until: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., content: _Optional[str] = ..., payload: _Optional[bytes] = ..., vector: _Optional[_Iterable[float]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deleted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., supersedes: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ..., version: _Optional[int] = ..., if_version: _Optional[int] = ..., namespace: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., kind: _Optional[str] = ..., key: _Optional[str] = ..., trust: _Optional[_Union[Trust, str]] = ..., origin: _Optional[_Union[Origin, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_by: _Optional[str] = ..., known_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Origin(_message.Message):
    __slots__ = ("source", "document", "chunk", "revision")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    source: str
    document: str
    chunk: int
    revision: str
    def __init__(self, source: _Optional[str] = ..., document: _Optional[str] = ..., chunk: _Optional[int] = ..., revision: _Optional[str] = ...) -> None: ...

class UpsertRequest(_message.Message):
    __slots__ = ("namespace", "records")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    records: _containers.RepeatedCompositeFieldContainer[Record]
    def __init__(self, namespace: _Optional[str] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ...) -> None: ...

class UpsertResponse(_message.Message):
    __slots__ = ("ids", "versions", "warnings")
    IDS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    versions: _containers.RepeatedScalarFieldContainer[int]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., versions: _Optional[_Iterable[int]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("namespace", "query_text", "query_vector", "top_k", "filter", "include_payload", "include_vector", "as_of", "include_invalidated", "ids_only", "predicates", "created_after", "created_before", "mode", "rerank_candidate_k", "between", "kind", "tags", "key", "min_trust", "expand", "require_complete", "known_at")
    class FilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    QUERY_TEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTOR_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RERANK_CANDIDATE_K_FIELD_NUMBER: _ClassVar[int]
    BETWEEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MIN_TRUST_FIELD_NUMBER: _ClassVar[int]
    EXPAND_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    query_text: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    top_k: int
    filter: _containers.ScalarMap[str, str]
    include_payload: bool
    include_vector: bool
    as_of: _timestamp_pb2.Timestamp
    include_invalidated: bool
    ids_only: bool
    predicates: _containers.RepeatedCompositeFieldContainer[FieldPredicate]
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    mode: SearchMode
    rerank_candidate_k: int
    between: TimeWindow
    kind: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    key: str
    min_trust: Trust
    expand: Expand
    require_complete: bool
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., query_text: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., top_k: _Optional[int] = ..., filter: _Optional[_Mapping[str, str]] = ..., include_payload: _Optional[bool] = ..., include_vector: _Optional[bool] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_invalidated: _Optional[bool] = ..., ids_only: _Optional[bool] = ..., predicates: _Optional[_Iterable[_Union[FieldPredicate, _Mapping]]] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., rerank_candidate_k: _Optional[int] = ..., between: _Optional[_Union[TimeWindow, _Mapping]] = ..., kind: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ..., min_trust: _Optional[_Union[Trust, str]] = ..., expand: _Optional[_Union[Expand, _Mapping]] = ..., require_complete: _Optional[bool] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FieldPredicate(_message.Message):
    __slots__ = ("key", "op", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    op: PredicateOp
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., op: _Optional[_Union[PredicateOp, str]] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class TimeWindow(_message.Message):
    __slots__ = ("until",)
    FROM_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    until: _timestamp_pb2.Timestamp
    def __init__(self, until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., **kwargs) -> None: ...

class Expand(_message.Message):
    __slots__ = ("hops", "limit")
    HOPS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    hops: int
    limit: int
    def __init__(self, hops: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "unembedded", "warnings")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    UNEMBEDDED_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    mode: SearchMode
    unembedded: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., unembedded: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("record", "score", "signals", "via")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    record: Record
    score: float
    signals: Signals
    via: _containers.RepeatedCompositeFieldContainer[Via]
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ..., score: _Optional[float] = ..., signals: _Optional[_Union[Signals, _Mapping]] = ..., via: _Optional[_Iterable[_Union[Via, _Mapping]]] = ...) -> None: ...

class Signals(_message.Message):
    __slots__ = ("lexical", "semantic", "graph")
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    lexical: LexicalSignal
    semantic: SemanticSignal
    graph: GraphSignal
    def __init__(self, lexical: _Optional[_Union[LexicalSignal, _Mapping]] = ..., semantic: _Optional[_Union[SemanticSignal, _Mapping]] = ..., graph: _Optional[_Union[GraphSignal, _Mapping]] = ...) -> None: ...

class LexicalSignal(_message.Message):
    __slots__ = ("rank", "score", "terms")
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    rank: int
    score: float
    terms: int
    def __init__(self, rank: _Optional[int] = ..., score: _Optional[float] = ..., terms: _Optional[int] = ...) -> None: ...

class SemanticSignal(_message.Message):
    __slots__ = ("rank", "similarity", "index")
    RANK_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    rank: int
    similarity: float
    index: str
    def __init__(self, rank: _Optional[int] = ..., similarity: _Optional[float] = ..., index: _Optional[str] = ...) -> None: ...

class GraphSignal(_message.Message):
    __slots__ = ("hops", "from_id")
    HOPS_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    hops: int
    from_id: str
    def __init__(self, hops: _Optional[int] = ..., from_id: _Optional[str] = ...) -> None: ...

class Via(_message.Message):
    __slots__ = ("entity", "predicate", "edge", "name")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    EDGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    entity: str
    predicate: str
    edge: str
    name: str
    def __init__(self, entity: _Optional[str] = ..., predicate: _Optional[str] = ..., edge: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("namespace", "id", "hard")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    hard: bool
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., hard: _Optional[bool] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExpireRequest(_message.Message):
    __slots__ = ("namespace", "filter", "action", "max_rows", "predicates", "kind", "tags", "key", "all")
    class FilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    filter: _containers.ScalarMap[str, str]
    action: ExpireAction
    max_rows: int
    predicates: _containers.RepeatedCompositeFieldContainer[FieldPredicate]
    kind: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    key: str
    all: bool
    def __init__(self, namespace: _Optional[str] = ..., filter: _Optional[_Mapping[str, str]] = ..., action: _Optional[_Union[ExpireAction, str]] = ..., max_rows: _Optional[int] = ..., predicates: _Optional[_Iterable[_Union[FieldPredicate, _Mapping]]] = ..., kind: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ..., all: _Optional[bool] = ...) -> None: ...

class ExpireResponse(_message.Message):
    __slots__ = ("affected",)
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    affected: int
    def __init__(self, affected: _Optional[int] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("namespace", "id", "known_at", "versions", "min_trust")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    MIN_TRUST_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    known_at: _timestamp_pb2.Timestamp
    versions: bool
    min_trust: Trust
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., versions: _Optional[bool] = ..., min_trust: _Optional[_Union[Trust, str]] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[Record]
    def __init__(self, versions: _Optional[_Iterable[_Union[Record, _Mapping]]] = ...) -> None: ...

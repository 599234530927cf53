"""``ErstwhileStore``: LangGraph's ``BaseStore`` over a erstwhile memory.

Each item is two kinds of record in one erstwhile namespace (docs/langgraph.md):
a *value* record per value ever put (a supersession chain: ``history`` and ``as_of``
see every one, the ranked search reads them) and one *head* record per item (its
current value, rewritten in place by each put, so ``get`` is one read by id and a
listing is one scan). A put writes both in one all-or-nothing upsert.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from erstwhile.domain.errors import InvalidInput, NotFound, PolicyLimit, WriteConflict
from erstwhile.domain.ids import new_id
from erstwhile.domain.records import Record, UpsertResult, validate_namespace
from erstwhile.domain.search import SearchResult
from erstwhile.domain.time import format_instant, from_us, parse_instant, to_us
from erstwhile.domain.vectors import MAX_COUNT
from erstwhile.langgraph import mapping as m

SINCE = "lg.since"  # on both kinds: when the current value was put (its valid_from)
PREVIOUS = "lg.previous"  # on a head: the last value ids of the item's deleted chains
PUT_ATTEMPTS = 10


class MemoryLike(Protocol):
    """What the store needs of ``erstwhile.open(...)`` or ``erstwhile.Client(...)``."""

    def upsert(self, namespace: str, records: Any) -> UpsertResult: ...
    def search(self, namespace: str, query: str | None = None, **options: Any) -> SearchResult: ...
    def get(self, namespace: str, id: str, version: int | None = None) -> Record: ...
    def history(self, namespace: str, id: str) -> list[Record]: ...
    def delete(self, namespace: str, id: str, hard: bool = False) -> None: ...
    def embedder_id(self, namespace: str) -> str: ...


class ErstwhileStore(BaseStore):
    """A LangGraph store whose items are erstwhile records.

    ``memory`` is what ``erstwhile.open(...)`` or ``erstwhile.Client(...)`` returns.
    ``namespace`` is the erstwhile namespace holding every item of this store (LangGraph's
    tuple namespaces live inside it). ``index`` takes LangGraph's ``fields`` (the JSON
    paths whose text is searched, default the whole value); the vectors are the erstwhile
    namespace's own embedder's, so ``search(query=…)`` is erstwhile's hybrid ranking.
    Beyond ``BaseStore``: :meth:`history` of a key, :meth:`get_as_of` and
    :meth:`search_as_of` (the store as it was at a past instant).

    A listing (``list_namespaces``, ``search`` without a query) is one erstwhile search
    of up to ``scan_limit`` records; a scope that holds that many is refused with
    :class:`~erstwhile.PolicyLimit`, never cut short. Against a server, give its
    ``max_top_k`` (1000 by default)."""

    supports_ttl = False

    def __init__(
        self,
        memory: MemoryLike,
        *,
        namespace: str = "langgraph",
        index: IndexConfig | None = None,
        scan_limit: int = MAX_COUNT,
    ) -> None:
        if isinstance(scan_limit, bool) or not isinstance(scan_limit, int) or scan_limit < 2:
            raise InvalidInput(f"scan_limit must be an integer of 2 or more, got {scan_limit!r}")
        self.scan_limit = scan_limit
        self.memory = memory
        self.namespace = validate_namespace(namespace)
        self.fields = _index_fields(index)
        if index and "dims" in index:
            _check_dims(index["dims"], memory.embedder_id(self.namespace))

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs the reads in order, then the puts (the last put of a key in the batch
        wins) as one erstwhile upsert, then the deletes."""
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise InvalidInput(f"unknown store operation {type(op).__name__}")
        if puts:
            self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # erstwhile's API is synchronous and thread-safe: run the batch off the loop
        return await asyncio.to_thread(self.batch, list(ops))

    # -- what erstwhile adds ------------------------------------------------------------

    def history(self, namespace: tuple[str, ...], key: str) -> list[Item]:
        """Every value ever put under the key, oldest first (deleted ones included:
        a delete is a soft delete), each with the time it was put as ``updated_at``."""
        return [_item(record) for record in self._chain(tuple(namespace), key)]

    def get_as_of(self, namespace: tuple[str, ...], key: str, as_of: Any) -> Item | None:
        """The value the item had at ``as_of`` (an RFC 3339 instant, a date or a
        datetime), or None if it had none then."""
        at = parse_instant(as_of, "as_of")
        for record in reversed(self._chain(tuple(namespace), key)):
            if record.deleted_at is None and _valid_at(record, at):
                return _item(record)
        return None

    def search_as_of(
        self,
        namespace_prefix: tuple[str, ...],
        as_of: Any,
        *,
        query: str,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchItem]:
        """``search(query=…)`` over the values the items had at ``as_of``."""
        op = SearchOp(
            tuple(namespace_prefix), filter=filter, limit=limit, offset=offset, query=query
        )
        return self._search(op, as_of=parse_instant(as_of, "as_of"))

    # -- reads ------------------------------------------------------------------------

    def _head(self, namespace: tuple[str, ...], key: str) -> Record | None:
        """The item's head record in any state (a deleted item's head is a tombstone)."""
        try:
            return self.memory.get(self.namespace, m.head_id(namespace, key))
        except NotFound:
            return None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        head = self._head(tuple(namespace), key)
        if head is None or head.deleted_at is not None:
            return None
        return _item(head)

    def _chain(self, namespace: tuple[str, ...], key: str) -> list[Record]:
        head = self._head(namespace, key)
        if head is None:
            return []
        tails = [*json.loads(head.metadata.get(PREVIOUS, "[]")), head.metadata[m.CURRENT]]
        records: list[Record] = []
        for tail in tails:
            records.extend(self.memory.history(self.namespace, tail))
        return records

    def _heads(self, scope: dict[str, str], predicates: list[dict[str, Any]]) -> list[Record]:
        """Every live head in scope: a lexical search for the word they all hold."""
        result = self.memory.search(
            self.namespace, m.HEAD_WORD, ranking="lexical", kind=m.HEAD_KIND, filter=scope,
            predicates=predicates, top_k=self.scan_limit, include_payload=True,
        )  # fmt: skip
        if len(result.hits) >= self.scan_limit:
            raise PolicyLimit(
                f"the listing's scope holds {self.scan_limit} items or more (scan_limit); "
                "narrow the namespace prefix or filter, or raise scan_limit (and the "
                "server's max_top_k)"
            )
        return [hit.record for hit in result.hits]

    def _search(self, op: SearchOp, *, as_of: int | None = None) -> list[SearchItem]:
        prefix = {m.label_field(i): label for i, label in enumerate(op.namespace_prefix)}
        exact, predicates = m.filter_scope(op.filter)
        scope = {**prefix, **exact}
        if op.query is None:
            heads = sorted(self._heads(scope, predicates), key=_newest_first)
            return [_search_item(h, None) for h in heads[op.offset : op.offset + op.limit]]
        options: dict[str, Any] = {} if as_of is None else {"as_of": format_instant(as_of)}
        wanted = op.offset + op.limit
        found = self.memory.search(
            self.namespace, op.query, kind=m.VALUE_KIND, filter={**scope, m.INDEXED: "true"},
            predicates=predicates, top_k=max(wanted, 1), include_payload=True, **options,
        )  # fmt: skip
        items = [_search_item(hit.record, hit.score) for hit in found.hits[op.offset : wanted]]
        if len(items) < op.limit and as_of is None:
            # As LangGraph's own stores do: items with nothing indexed follow the ranked
            # ones, without a score, when the page has room.
            unranked = sorted(
                self._heads({**scope, m.INDEXED: "false"}, predicates), key=_newest_first
            )
            items += [_search_item(h, None) for h in unranked[: op.limit - len(items)]]
        return items

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        scope: dict[str, str] = {}
        for condition in conditions:
            if condition.match_type == "prefix":
                scope.update(
                    {m.label_field(i): str(label) for i, label in enumerate(condition.path)
                     if label != "*"}
                )  # fmt: skip
        found = {tuple(json.loads(head.metadata[m.NS])) for head in self._heads(scope, [])}
        listed = [
            ns
            for ns in found
            if all(m.matches(ns, c.path, c.match_type == "suffix") for c in conditions)
        ]
        if op.max_depth is not None:
            listed = list({ns[: op.max_depth] for ns in listed})
        return sorted(listed)[op.offset : op.offset + op.limit]

    # -- writes -----------------------------------------------------------------------

    def _apply_puts(self, puts: Sequence[PutOp]) -> None:
        for op in puts:
            if op.ttl is not None:
                raise NotImplementedError("ErstwhileStore does not support TTL (supports_ttl)")
        for attempt in range(PUT_ATTEMPTS):
            try:
                self._write_puts(puts)
                return
            except WriteConflict:
                # another writer put one of these keys between our read of its head and
                # our write (erstwhile refused a second current value or a forked chain,
                # and wrote nothing): read again, so the last put wins, as in LangGraph
                if attempt == PUT_ATTEMPTS - 1:
                    raise

    def _write_puts(self, puts: Sequence[PutOp]) -> None:
        records: list[dict[str, Any]] = []
        deletes: list[str] = []
        now = to_us(datetime.now(UTC))
        for op in puts:
            namespace = tuple(op.namespace)
            head = self._head(namespace, op.key)
            live = head is not None and head.deleted_at is None
            if op.value is None:
                if live:
                    assert head is not None
                    deletes += [head.metadata[m.CURRENT], head.id]
                continue
            records += self._put_records(namespace, op, head if live else None, head, now)
        if records:
            self.memory.upsert(self.namespace, records)
        for record_id in deletes:  # a soft delete of a tombstone is a no-op
            self.memory.delete(self.namespace, record_id)

    def _put_records(
        self,
        namespace: tuple[str, ...],
        op: PutOp,
        live: Record | None,
        tombstone: Record | None,
        now: int,
    ) -> list[dict[str, Any]]:
        """The value record (superseding the current one) and the head's next version."""
        value = op.value
        if not isinstance(value, Mapping):
            raise InvalidInput(f"value must be a JSON object (a dict), got {type(value).__name__}")
        try:
            payload = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"value must be JSON-serialisable: {error}") from None
        texts = self._texts(value, op.index)
        since = now
        previous: list[str] = []
        if live is not None:
            # a chain's validities must increase, even for two puts in one microsecond
            since = max(now, parse_instant(live.metadata[SINCE], SINCE) + 1)
        elif tombstone is not None:
            previous = [*json.loads(tombstone.metadata.get(PREVIOUS, "[]"))]
            previous.append(tombstone.metadata[m.CURRENT])
        created = live.metadata[m.CREATED] if live is not None else format_instant(since)
        metadata = {
            **m.value_metadata(value),
            **m.namespace_metadata(namespace, op.key),
            m.INDEXED: "true" if texts else "false",
            m.CREATED: created,
            SINCE: format_instant(since),
        }
        value_id = new_id()
        value_record: dict[str, Any] = {
            "id": value_id,
            "kind": m.VALUE_KIND,
            "key": m.item_key(namespace, op.key),
            # unindexed values still need text; they are kept out of the ranked search
            "content": "\n".join(texts) if texts else payload.decode("utf-8"),
            "payload": payload,
            "metadata": metadata,
            "valid_from": format_instant(since),
        }
        if live is not None:
            value_record["supersedes"] = [live.metadata[m.CURRENT]]
        head_metadata = {**metadata, m.CURRENT: value_id}
        if previous:
            head_metadata[PREVIOUS] = json.dumps(previous)
        head_record = {
            "id": m.head_id(namespace, op.key),
            "kind": m.HEAD_KIND,
            "content": m.HEAD_WORD,
            "payload": payload,
            "metadata": head_metadata,
        }
        return [value_record, head_record]

    def _texts(self, value: Mapping[str, Any], index: Any) -> list[str]:
        """The text of the value that is searched: the store's fields, or the put's."""
        if index is False:
            return []
        paths = self.fields if index is None else _paths(index)
        texts: list[str] = []
        for path in paths:
            texts += [text for text in get_text_at_path(dict(value), path) if text.strip()]
        return texts


def _index_fields(index: IndexConfig | None) -> list[Any]:
    config: Mapping[str, Any] = index or {}
    unknown = sorted(set(config) - {"fields", "dims"})
    if "embed" in unknown:
        raise InvalidInput(
            "index.embed is erstwhile's embedder here: open erstwhile with it "
            "(erstwhile.open(..., embedder=erstwhile.langgraph.LangChainEmbedder(embeddings, "
            "dims))) and give the store only index.fields"
        )
    if unknown:
        raise InvalidInput(f"index takes fields (and dims); {', '.join(unknown)} is not known")
    return _paths(config.get("fields") or ["$"])


def _paths(fields: Sequence[str]) -> list[Any]:
    """LangGraph's field paths as ``get_text_at_path`` takes them (``"$"``: the whole
    value as JSON)."""
    return ["$" if path == "$" else tokenize_path(path) for path in fields]


def _check_dims(dims: Any, embedder_id: str) -> None:
    """``index.dims``, when given, must be what erstwhile's embedder makes."""
    made = embedder_id.rsplit(":", 1)[-1]
    if str(dims) != made:
        raise InvalidInput(
            f"index.dims is {dims!r} but the erstwhile namespace's embedder is {embedder_id!r}; "
            "drop dims (the store uses erstwhile's embedder) or open erstwhile with a "
            "matching one"
        )


def _valid_at(record: Record, at: int) -> bool:
    assert record.valid_from is not None
    started = to_us(record.valid_from) <= at
    return started and (record.valid_to is None or to_us(record.valid_to) > at)


def _stamp(record: Record, field: str) -> datetime:
    return from_us(parse_instant(record.metadata[field], field))


def _newest_first(head: Record) -> tuple[int, str]:
    return (-parse_instant(head.metadata[SINCE], SINCE), head.id)


def _value(record: Record) -> dict[str, Any]:
    assert record.payload is not None, "the store's records always carry their value"
    value: dict[str, Any] = json.loads(record.payload)
    return value


def _item(record: Record) -> Item:
    return Item(
        value=_value(record),
        key=record.metadata[m.KEY],
        namespace=tuple(json.loads(record.metadata[m.NS])),
        created_at=_stamp(record, m.CREATED),
        updated_at=_stamp(record, SINCE),
    )


def _search_item(record: Record, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=tuple(json.loads(record.metadata[m.NS])),
        key=record.metadata[m.KEY],
        value=_value(record),
        created_at=_stamp(record, m.CREATED),
        updated_at=_stamp(record, SINCE),
        score=score,
    )

"""An optional rerank stage: after fusion, a reranker re-orders the first hits by how
well each answers the query. Off unless configured (``open(..., reranker=...)`` or
``ERSTWHILE_RERANKER_URL``); no reranker ships in the package, because no local
cross-encoder installs offline without torch here.

The protocol is one method, ``scores(query, documents) -> one float per document``
(higher is better). :class:`HttpReranker` speaks the rerank API many servers share
(text-embeddings-inference, Jina, Cohere, vLLM, Infinity)::

    POST {base_url}/rerank  {"query": "...", "documents": ["...", ...], "model": "..."?}
    200 {"results": [{"index": 0, "relevance_score": 0.93}, ...]}

(a bare list of ``{"index", "score"}`` objects is read too). Every document must be
scored exactly once, or the reply is refused as ``ProviderFailed``; a reranker that
fails fails the search (a caller who asked for reranking is not silently given none).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.domain.search import Hit
from erstwhile.domain.secrets import Secret

#: How many fused hits the reranker sees at most (the rest keep their fused order).
DEFAULT_DEPTH = 20
ENV_URL = "ERSTWHILE_RERANKER_URL"
ENV_MODEL = "ERSTWHILE_RERANKER_MODEL"
ENV_KEY = "ERSTWHILE_RERANKER_API_KEY"


class Reranker(ABC):
    """Scores documents against a query; ``depth`` bounds how many it is sent."""

    name: str = "reranker"
    depth: int = DEFAULT_DEPTH

    @abstractmethod
    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in the documents' order; higher is better."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Releases what the reranker holds (connections)."""


class HttpReranker(Reranker):
    """A rerank server reached over HTTP (module docstring: the request and reply)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        path: str = "/rerank",
        depth: int = DEFAULT_DEPTH,
        timeout: float = 30.0,
        max_attempts: int = 3,
    ) -> None:
        from erstwhile.embedding.http import HttpClient  # httpx only when configured

        if not 1 <= depth <= 1000:
            raise InvalidInput(f"reranker depth must be between 1 and 1000, got {depth}")
        self.model = model
        self.path = path if path.startswith("/") else "/" + path
        self.depth = depth
        self.name = f"http reranker at {base_url.rstrip('/')}"
        self._client = HttpClient(
            name="reranker", base_url=base_url, timeout=timeout, max_attempts=max_attempts,
            api_key=Secret(api_key) if api_key else None, setting="reranker base_url",
        )  # fmt: skip

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        payload: dict[str, Any] = {"query": query, "documents": list(documents)}
        if self.model:
            payload["model"] = self.model
        reply = self._client.post_json(self.path, payload)
        return _read_scores(reply, len(documents), self._client.display_url + self.path)

    def close(self) -> None:
        self._client.close()


def _read_scores(reply: Any, count: int, where: str) -> list[float]:
    items = reply.get("results") if isinstance(reply, dict) else reply
    if not isinstance(items, list):
        raise ProviderFailed(f"reranker {where}: the reply has no list of results")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise ProviderFailed(f"reranker {where}: a result is not an object")
        index = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise ProviderFailed(f"reranker {where}: result index {index!r} names no document")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ProviderFailed(f"reranker {where}: document {index} has no numeric score")
        if scores[index] is not None:
            raise ProviderFailed(f"reranker {where}: document {index} was scored twice")
        scores[index] = float(score)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise ProviderFailed(f"reranker {where}: documents {missing[:5]} were not scored")
    return [s for s in scores if s is not None]


def rerank_hits(reranker: Reranker, query: str, hits: list[Hit]) -> list[Hit]:
    """The first ``reranker.depth`` hits re-ordered by the reranker's score (ties keep
    the fused order), the rest after them as they were. Each reranked hit's score is
    the reranker's; ``signals["rerank"]`` holds its rank and score."""
    head, tail = hits[: reranker.depth], hits[reranker.depth :]
    scores = reranker.scores(query, [hit.record.content for hit in head])
    if len(scores) != len(head):
        raise ProviderFailed(f"{reranker.name} returned {len(scores)} scores for {len(head)}")
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    out = []
    for rank, i in enumerate(order, start=1):
        hit = head[i]
        signals = {**hit.signals, "rerank": {"rank": rank, "score": scores[i]}}
        out.append(hit.model_copy(update={"score": scores[i], "signals": signals}))
    return out + tail


RerankerSpec = Reranker | str | None


def build_reranker(spec: RerankerSpec) -> Reranker | None:
    """``None`` reads ``ERSTWHILE_RERANKER_URL`` (unset: no reranking); ``"none"`` turns
    it off; a URL is an :class:`HttpReranker`; a :class:`Reranker` is used as is."""
    if isinstance(spec, Reranker):
        return spec
    if spec is None:
        spec = os.environ.get(ENV_URL) or "none"
    if spec.strip().lower() == "none":
        return None
    if not spec.startswith(("http://", "https://")):
        raise InvalidInput(f"reranker must be 'none' or an http(s) URL, got {spec!r}")
    return HttpReranker(
        spec, model=os.environ.get(ENV_MODEL) or None, api_key=os.environ.get(ENV_KEY) or None
    )

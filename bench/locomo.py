"""Retrieval quality on LoCoMo (five conversations, 2,760 turns, 999 questions).

Each conversation is written into its own namespace, one record per dialog turn,
``valid_from`` = its session's date and time, speaker, session, turn id and
conversation in metadata, through two write paths, each in a store of its own:

- ``import``: erstwhile's own import path, ``erstwhile.jobs.importing.import_conversation``;
- ``turns``: the same records written one at a time with ``Memory.add``, in the order
  they were said, as an agent that stores each turn as it happens.

Two content formats are measured, each in a store of its own (fixed before looking at
any result, the same for every question):

- ``user``: ``Speaker: text`` — how a user stores a turn (the import's default);
  nothing of the date is in the text;
- ``dated``: ``(YYYY-MM-DD) Speaker said, "text"`` — the paper's retrieval format,
  ``(date) Speaker said, "text"``, with the session date written as an ISO day.

In both, a turn that shares an image gets `` [shared <its BLIP caption>]`` after its
text (the caption is the only trace of the image in the data); the question is the
query text, as is.

Each question is searched within its conversation (top 10) with ``ranking`` lexical
(BM25), semantic (the default embedder, all-MiniLM-L6-v2 int8; the import embeds each
turn with the turn before it, and so does a write that names its session, see
docs/importing.md), hybrid (both lanes 50 deep, RRF
k = 5 with the coverage bonus, :mod:`erstwhile.domain.fusion`) and auto (the default a
caller gets without asking) — erstwhile's defaults; nothing is set per question.

Evidence ids are normalised: a string holding several ids ("D8:6; D9:17") counts as
each; "D:11:26" reads as D11:26 and "D30:05" as D30:5; ids that name no turn of the
conversation are dropped, and a question left with no evidence is skipped (reported).
Metrics per question, then averaged: R@k = share of its evidence turns in the top k;
NDCG@10 with binary gains; Hit@10 = at least one evidence turn in the top 10.

    python -m bench.locomo [--paths import,turns] [--formats user,dated]
                           [--conversations N] [--cache FILE] [--out FILE]

``--cache`` keeps every text's vector in a file (read at start, written at the end), so
a rerun embeds only texts it has not seen; the vectors are the embedder's own.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from bench.common import latency, locomo_path, log, write_json
from erstwhile.embedding.base import Embedder
from erstwhile.embedding.binding import build_embedder
from erstwhile.jobs.importing import DEFAULT_TEMPLATE, conversation_records, import_conversation

TEMPLATE = '({date}) {speaker} said, "{text}"'
FORMATS = {"user": DEFAULT_TEMPLATE, "dated": TEMPLATE}
PATHS = ("import", "turns")
RANKINGS = ("lexical", "semantic", "hybrid", "auto")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
REFERENCE = {"hybrid R@10, categories 1-5, turn level (MiniLM + BM25, RRF)": 0.577}
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")


def session_time(text: str) -> datetime:
    """LoCoMo writes "1:56 pm on 8 May, 2023"; the time zone is not given: UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    conversation = sample["conversation"]
    numbers = sorted(int(m[1]) for k in conversation if (m := _SESSION.match(k)))
    sessions = []
    for n in numbers:
        turns = []
        for turn in conversation[f"session_{n}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shared {turn['blip_caption']}]"
            turns.append({"speaker": turn["speaker"], "text": text, "id": turn["dia_id"]})
        sessions.append(
            {"id": str(n), "timestamp": session_time(conversation[f"session_{n}_date_time"]),
             "turns": turns}
        )  # fmt: skip
    return sessions


def evidence_ids(raw: list[Any], known: set[str]) -> tuple[list[str], int]:
    """Normalised evidence turn ids that exist, and how many named none."""
    found: list[str] = []
    dropped = 0
    for item in raw:
        ids = [f"D{a}:{b}" for a, b in _EVIDENCE.findall(str(item))]
        if not ids:
            dropped += 1
        for turn in ids:
            if turn in known:
                found.append(turn)
            else:
                dropped += 1
    return list(dict.fromkeys(found)), dropped


def metrics(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    gains = [1.0 if r in relevant else 0.0 for r in ranked[:10]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return {
        "R@5": sum(1 for r in ranked[:5] if r in relevant) / len(relevant),
        "R@10": sum(gains) / len(relevant),
        "NDCG@10": dcg / ideal,
        "Hit@10": 1.0 if any(gains) else 0.0,
    }


def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    keys = rows[0].keys()
    out = {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys}
    out["questions"] = len(rows)
    return out


def run_locomo(
    path: Path,
    *,
    conversations: int | None = None,
    paths: tuple[str, ...] = PATHS,
    formats: tuple[str, ...] = tuple(FORMATS),
    cache: Path | None = None,
) -> dict[str, Any]:
    """Each content format through each write path, each in a store of its own (BM25
    statistics are per store). A run's name is its format, then ``+turns`` for the
    turn-by-turn path (``user`` is the import path, ``user+turns`` the other)."""
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; set ERSTWHILE_LOCOMO or place the shared data beside the repo"
        )
    samples = json.loads(path.read_text())
    if conversations is not None:
        samples = samples[:conversations]
    started = time.perf_counter()
    embedder = VectorFile(cache)  # one text is embedded once per invocation
    runs: dict[str, Any] = {}
    try:
        for name in formats:
            for write in paths:
                label = name if write == "import" else f"{name}+{write}"
                runs[label] = run_format(samples, FORMATS[name], write=write, embedder=embedder)
    finally:
        embedder.save()
    first = next(iter(runs.values()))
    return {
        "file": path.name,
        "conversations": [str(s["sample_id"]) for s in samples],
        "turns": first["turns"],
        "questions_scored": first["questions_scored"],
        "questions_skipped": first["questions_skipped"],
        "evidence_ids_dropped": first["evidence_ids_dropped"],
        "embedder": first["embedder"],
        "categories": CATEGORIES,
        "formats": runs,
        "reference": REFERENCE,
        "seconds": round(time.perf_counter() - started, 1),
    }


class VectorFile(Embedder):
    """The default embedder behind a table of the vectors it gave (same id, same
    vectors), kept in ``path`` when given: a text is embedded once per invocation (the
    second write path's write time has no embedding in it), and a rerun with the same
    file embeds only texts it has not seen."""

    def __init__(self, path: Path | None) -> None:
        inner = build_embedder(None)
        assert inner is not None
        super().__init__(model=inner.model, dimensions=inner.dimensions,
                         batch_size=inner.batch_size, max_chars=inner.max_chars)  # fmt: skip
        self.provider = inner.provider
        self.inner = inner
        self.path = path
        self.known: dict[tuple[str, bool], np.ndarray] = {}
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as data:
                for text, query, vector in zip(
                    data["texts"], data["queries"], data["vectors"], strict=True
                ):
                    self.known[(str(text), bool(query))] = vector
        self.loaded = len(self.known)

    @property
    def embedder_id(self) -> str:
        return self.inner.embedder_id

    def truncate(self, text: str) -> str:
        return self.inner.truncate(text)

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self.inner._embed_batch(texts, query=query)

    def _embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (t, query) not in self.known))
        if missing:
            for text, vector in zip(missing, self.inner._embed(missing, query=query), strict=True):
                self.known[(text, query)] = vector
        return np.stack([self.known[(t, query)] for t in texts]).astype(np.float32)

    def save(self) -> None:
        if self.path is None or len(self.known) == self.loaded:
            return
        keys = list(self.known)
        np.savez(self.path, texts=np.array([t for t, _ in keys]),
                 queries=np.array([q for _, q in keys]),
                 vectors=np.stack([self.known[k] for k in keys]))  # fmt: skip
        self.loaded = len(self.known)


def run_format(
    samples: list[dict[str, Any]],
    template: str,
    *,
    write: str = "import",
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-locomo-"))
    per: dict[str, dict[str, list[dict[str, float]]]] = {r: defaultdict(list) for r in RANKINGS}
    times: dict[str, list[float]] = {r: [] for r in RANKINGS}
    skipped: list[str] = []
    dropped_ids = 0
    turns = 0
    import_s = 0.0
    try:
        memory = erstwhile.open(workdir / "locomo.db", embedder=embedder, background_jobs=False)
        with memory:
            embedder_id = memory.embedder_id("default")
            for sample in samples:
                sample_id = str(sample["sample_id"])
                namespace = sample_id.lower()
                sessions = sessions_of(sample)
                known = {t["id"] for s in sessions for t in s["turns"]}
                t = time.perf_counter()
                written = write_turns(memory, namespace, sessions, sample_id, template, write)
                import_s += time.perf_counter() - t
                turns += written
                log(f"  locomo {sample_id}: {written} turns written ({write}, "
                    f"{time.perf_counter() - t:.1f} s, content {template!r})")  # fmt: skip
                for number, qa in enumerate(sample["qa"]):
                    relevant, dropped = evidence_ids(qa.get("evidence", []), known)
                    dropped_ids += dropped
                    if not relevant:
                        skipped.append(f"{sample_id} qa[{number}]")
                        continue
                    wanted = {f"{sample_id}/{turn}" for turn in relevant}
                    category = int(qa["category"])
                    for ranking in RANKINGS:
                        t = time.perf_counter()
                        result = memory.search(
                            namespace, str(qa["question"]), ranking=ranking, top_k=10
                        )
                        times[ranking].append(time.perf_counter() - t)
                        scores = metrics(result.ids(), wanted)
                        per[ranking][str(category)].append(scores)
        table: dict[str, Any] = {}
        for ranking in RANKINGS:
            rows = per[ranking]
            entry = {c: summarise(rows[c]) for c in sorted(rows)}
            entry["1-4"] = summarise([r for c in ("1", "2", "3", "4") for r in rows.get(c, [])])
            entry["1-5"] = summarise([r for c in rows for r in rows[c]])
            table[ranking] = entry
        return {
            "template": template,
            "write": write,
            "turns": turns,
            "questions_scored": sum(len(rows) for rows in per["hybrid"].values()),
            "questions_skipped": skipped,
            "evidence_ids_dropped": dropped_ids,
            "embedder": embedder_id,
            "results": table,
            "search_latency": {r: latency(times[r]) for r in RANKINGS},
            "import_seconds": round(import_s, 1),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def write_turns(
    memory: erstwhile.Memory,
    namespace: str,
    sessions: list[dict[str, Any]],
    conversation: str,
    template: str,
    write: str,
) -> int:
    """Writes a conversation's turns through the ``write`` path; returns how many."""
    if write == "import":
        report = import_conversation(
            memory, namespace, sessions, conversation=conversation, template=template
        )
        return report.records
    count = 0
    for _, record in conversation_records(sessions, conversation=conversation, template=template):
        memory.add(namespace, record.content, id=record.id, kind=record.kind,
                   metadata=record.metadata, valid_from=record.valid_from,
                   source=record.source)  # fmt: skip
        count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--paths", default=",".join(PATHS), help="write paths, comma-separated: import, turns"
    )
    parser.add_argument(
        "--formats", default=",".join(FORMATS), help="content formats, comma-separated: user, dated"
    )
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the file's first N conversations"
    )
    parser.add_argument(
        "--cache", type=Path, default=None, help="a .npz file of vectors kept across runs"
    )
    parser.add_argument("--out", type=Path, default=None, help="where the JSON goes")
    args = parser.parse_args()  # fmt: skip
    paths = tuple(p for p in args.paths.split(",") if p)
    formats = tuple(f for f in args.formats.split(",") if f)
    for given, allowed in ((paths, PATHS), (formats, tuple(FORMATS))):
        unknown = [x for x in given if x not in allowed]
        if unknown:
            parser.error(f"{unknown[0]!r} is not one of {', '.join(allowed)}")
    result = run_locomo(locomo_path(), conversations=args.conversations, paths=paths,
                        formats=formats, cache=args.cache)  # fmt: skip
    for name, run in result["formats"].items():
        hybrid = run["results"]["hybrid"]
        log(
            f"{name}: hybrid R@10 1-5 {hybrid['1-5']['R@10']:.4f}, per category "
            + ", ".join(f"{c} {hybrid[c]['R@10']:.4f}" for c in "12345" if c in hybrid)
        )
    if args.out is not None:
        write_json(args.out, result)


if __name__ == "__main__":
    main()

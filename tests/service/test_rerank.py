"""The optional rerank stage against a real rerank server process (rerank_server.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import erstwhile
from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding import HashEmbedder
from erstwhile.rerank import HttpReranker, build_reranker

SERVER = Path(__file__).with_name("rerank_server.py")
NOTES = [
    {"id": "a", "content": "the garden shed holds the red bicycle"},
    {"id": "b", "content": "a red bicycle"},
    {"id": "c", "content": "where is the red bicycle kept? in the garden shed"},
    {"id": "d", "content": "the weather was mild"},
]


def start(mode: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), mode], stdout=subprocess.PIPE, text=True,
        env={"RERANK_LOG": str(log), "PATH": ""},
    )  # fmt: skip
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture
def rerank_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "requests.jsonl"
    proc, url = start("ok", log)
    try:
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_off_unless_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ERSTWHILE_RERANKER_URL", raising=False)
    assert build_reranker(None) is None
    assert build_reranker("none") is None
    with erstwhile.open(tmp_path / "m.db", embedder=HashEmbedder(32), background_jobs=False) as m:
        m.upsert("ns", NOTES)
        hits = m.search("ns", "where is the red bicycle kept", top_k=3).hits
        assert all("rerank" not in h.signals for h in hits)


def test_the_reranker_reorders_the_fused_hits(
    rerank_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, log = rerank_server
    query = "where is the red bicycle kept"
    with erstwhile.open(tmp_path / "m.db", embedder=HashEmbedder(32), background_jobs=False) as m:
        m.upsert("ns", NOTES)
        fused = m.search("ns", query, top_k=10).ids()
    reranker = HttpReranker(url, model="tiny", depth=3)
    with erstwhile.open(tmp_path / "m.db", embedder=HashEmbedder(32), background_jobs=False,
                        reranker=reranker) as m:  # fmt: skip
        result = m.search("ns", query, top_k=2)
    sent = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    documents = [NOTES[ord(i) - 97]["content"] for i in fused[:3]]
    assert sent == [{"query": query, "documents": documents, "model": "tiny"}]
    # the server's relevance: the share of the query's words each document holds
    words = set(query.split())
    expected = sorted(fused[:3], key=lambda i: (
        -len(words & set(NOTES[ord(i) - 97]["content"].replace("?", "").split())),
        fused.index(i)))  # fmt: skip
    assert result.ids() == expected[:2]
    assert [h.signals["rerank"]["rank"] for h in result.hits] == [1, 2]
    assert result.hits[0].score == pytest.approx(
        len(words & set(NOTES[ord(expected[0]) - 97]["content"].replace("?", "").split())) / 6
    )


@pytest.mark.parametrize("mode", ["short", "twice", "error"])
def test_a_bad_reply_fails_the_search(mode: str, tmp_path: Path) -> None:
    proc, url = start(mode, tmp_path / "log.jsonl")
    try:
        with erstwhile.open(tmp_path / "m.db", embedder=HashEmbedder(32), background_jobs=False,
                            reranker=HttpReranker(url, max_attempts=1)) as m:  # fmt: skip
            m.upsert("ns", NOTES)
            with pytest.raises(ProviderFailed):
                m.search("ns", "red bicycle")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bad_settings_are_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match="reranker must be"):
        build_reranker("ftp://example.invalid")
    with pytest.raises(InvalidInput, match="depth"):
        HttpReranker("http://127.0.0.1:9", depth=0)
    monkeypatch.setenv("ERSTWHILE_RERANKER_URL", "http://127.0.0.1:9")
    reranker = build_reranker(None)
    assert isinstance(reranker, HttpReranker)
    reranker.close()

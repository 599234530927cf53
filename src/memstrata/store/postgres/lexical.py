"""The lexical lane's words: the same tokens on PostgreSQL as on SQLite.

SQLite's FTS5 ``unicode61`` tokenizer (case folded, diacritics removed) decides what
a word is on the SQLite backend. PostgreSQL's own parser decides differently
(``3.14``, ``a@b.com`` and ``foo-bar`` are single tokens there, and its Unicode
tables are newer), so the same query would match different records. To keep one
answer on both backends, the PostgreSQL store asks the very same tokenizer — the
FTS5 module of Python's ``sqlite3``, on an in-memory database — for the tokens and
their positions, and writes them as a ``tsvector`` literal; a query becomes a
``tsquery`` literal of the same tokens (words OR-ed, a word that splits into several
tokens is a phrase). PostgreSQL then only matches and ranks (``ts_rank_cd``): the
text-search configuration is ``simple`` in effect (no stemming, no stop words).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from memstrata.domain.search import query_words

# PostgreSQL's limits: a lexeme under 2 KiB, positions 1..16383, 256 positions kept
# per lexeme, and a whole tsvector under 1 MiB.
MAX_LEXEME_BYTES = 2046
MAX_POSITION = 16383
MAX_POSITIONS_PER_LEXEME = 256
MAX_TSVECTOR_BYTES = 1_000_000

_local = threading.local()


def _tokenizer() -> sqlite3.Connection:
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:")
        conn.execute(
            "CREATE VIRTUAL TABLE doc USING fts5 (content,"
            " tokenize = 'unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE doc_terms USING fts5vocab (doc, 'instance')")
        _local.conn = conn
    return conn


def tokenize_many(texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """(token, 0-based position) of each text, in position order."""
    if not texts:
        return []
    conn = _tokenizer()
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO doc (rowid, content) VALUES (?, ?)",
            [(i + 1, text) for i, text in enumerate(texts)],
        )
        rows = conn.execute("SELECT doc, term, offset FROM doc_terms").fetchall()
    finally:
        conn.execute("ROLLBACK")
    out: list[list[tuple[str, int]]] = [[] for _ in texts]
    for doc, term, offset in rows:
        out[doc - 1].append((term, offset))
    for tokens in out:
        tokens.sort(key=lambda token: token[1])
    return out


def _quote(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(tokens: Sequence[tuple[str, int]]) -> str:
    """A ``tsvector`` input string: each token with its 1-based positions."""
    positions: dict[str, list[int]] = {}
    for token, offset in tokens:
        if len(token.encode("utf-8")) > MAX_LEXEME_BYTES:
            continue  # PostgreSQL cannot hold it; no query word can be that long either
        kept = positions.setdefault(token, [])
        if len(kept) < MAX_POSITIONS_PER_LEXEME:
            kept.append(min(offset + 1, MAX_POSITION))
    parts: list[str] = []
    size = 0
    for token, spots in positions.items():
        part = _quote(token) + ":" + ",".join(str(p) for p in dict.fromkeys(spots))
        size += len(part.encode("utf-8"))
        if size > MAX_TSVECTOR_BYTES:
            break  # an enormous text keeps its first words searchable
        parts.append(part)
    return " ".join(parts)


def documents(texts: Sequence[str]) -> list[str]:
    """The ``tsvector`` literal of each text."""
    return [tsvector_literal(tokens) for tokens in tokenize_many(texts)]


def query_literal(text: str) -> str | None:
    """The query's plain words OR-ed, as a ``tsquery`` input string (None: no words).

    Mirrors the SQLite lane, where each word is an FTS5 phrase: a word made of
    several tokens (``foo_bar``) must match them side by side."""
    words = query_words(text)
    if not words:
        return None
    phrases = []
    for tokens in tokenize_many(words):
        terms = [_quote(token) for token, _ in tokens if len(token.encode()) <= MAX_LEXEME_BYTES]
        if terms:
            phrases.append(terms[0] if len(terms) == 1 else "(" + " <-> ".join(terms) + ")")
    return " | ".join(dict.fromkeys(phrases)) or None

"""A document's terms, with each word's stem remembered (``words._stems``), are the
terms of stemming every word of it afresh: the same terms in the same order, cold or
warm, in every language, for any text (long words, accents, stop words, digits)."""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections import Counter

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from erstwhile.domain import words
from erstwhile.domain.words import (
    LANGUAGES,
    MAX_TERM,
    SIMPLE,
    STOP_WORDS,
    term_counts,
    term_counts_of,
    terms,
)
from erstwhile.store.sql import lexical

_WORD = re.compile(r"[^\W_]+")


def _fold(word: str) -> str:
    word = word.lower()
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", word):
        if unicodedata.combining(char) and kept and kept[-1] < "\u0370":
            continue
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


def _oracle(text: str, language: str) -> list[str]:
    """Every word found, folded, cut, and (English) dropped or stemmed, one by one."""
    found = [_fold(word)[:MAX_TERM] for word in _WORD.findall(unicodedata.normalize("NFC", text))]
    if language == SIMPLE:
        return found
    stemmer = Stemmer.Stemmer(language)
    return [stemmer.stemWord(w)[:MAX_TERM] for w in found if w not in STOP_WORDS]


_PIECES = st.one_of(
    st.sampled_from(["running", "runs", "the", "What", "didn't", "Café", "naïve", "ÉCOLE", "a_b",
                     "x" * 140, "running" * 20, "1e5", "  ", "\t", ",", "ß", "İstanbul", "Ⅻ",
                     "ﬁle", "中文", "😀"]),
    st.text(max_size=6),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map(" ".join), st.sampled_from(LANGUAGES))
def test_remembered_stems_give_every_words_stem(text: str, language: str) -> None:
    expected = _oracle(text, language)
    assert terms(text, language) == expected  # cold or warm: as earlier examples left it
    assert terms(text, language) == expected  # warm
    counts, length = term_counts(text, language)
    assert type(counts) is Counter and counts == Counter(expected) and length == len(expected)
    other = text[::-1]
    batch = term_counts_of([text, other, text], language)
    assert batch == [(counts, length), term_counts(other, language), (counts, length)]
    assert all(type(c) is Counter for c, _ in batch)


def test_the_remembered_stems_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stems start again once there are MAX_STEMS, and give the same terms."""
    monkeypatch.setattr(words, "MAX_STEMS", 3)
    for n in range(10):
        text = f"running word{n} stones the {n}"
        assert terms(text, "english") == _oracle(text, "english")
        assert len(words._stems("english")) <= 3 + 5  # a text's 5 words beside the last 3


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12).map(" ".join), st.sampled_from(LANGUAGES))
def test_a_document_splits_into_its_terms_in_sql(text: str, language: str) -> None:
    """A merge splits a stored document into its terms in SQL (``lexical.split_terms``,
    which quotes each as JSON without escaping it): every term of any text comes back
    as itself, as often as the text holds it."""
    counts, _ = term_counts(text, language)
    if not counts:
        return  # a document without terms is not stored
    conn = sqlite3.connect(":memory:")
    try:
        found = conn.execute(
            f"SELECT value FROM {lexical.split_terms('?')}", (lexical.packed(counts),)
        ).fetchall()
    finally:
        conn.close()
    assert Counter(value for (value,) in found) == counts


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcé1", min_size=1, max_size=4), st.integers(1, 4)))
def test_a_packed_document_holds_each_term_as_often_as_counted_in_order(
    counts: dict[str, int],
) -> None:
    assert lexical.packed(Counter(counts)) == " ".join(sorted(Counter(counts).elements()))

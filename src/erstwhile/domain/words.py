"""What a word is for the lexical lane: one tokenisation for both backends.

Text is split into runs of letters and digits (Unicode; ``_``, apostrophes and all
punctuation separate), folded to lower case with accents removed from Latin letters
(``Café`` = ``cafe``), and then, by the namespace's text-search language (SPEC §2):

- ``english`` (the default): common English function words are dropped (``the``,
  ``what``, ``did`` …) and every other word is reduced to its Snowball (Porter 2)
  stem, so ``running``, ``runs`` and ``run`` are one term;
- ``simple``: the folded words as they are.

Documents and queries go through the same function, so what matches is decided in
Python, never by an engine's own parser: SQLite and PostgreSQL index the same terms.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter, _count_elements  # type: ignore[attr-defined]
from collections.abc import Iterable

import Stemmer

from erstwhile.domain.errors import InvalidInput
from erstwhile.domain.validation import quoted

ENGLISH = "english"
SIMPLE = "simple"
LANGUAGES = (ENGLISH, SIMPLE)
#: A namespace without a configured language: most users write English and expect
#: "runs" to find "running".
DEFAULT_LANGUAGE = ENGLISH

#: A term is cut to this many characters (an index entry must stay small; the query
#: is cut the same way, so a long token still finds itself).
MAX_TERM = 128

_WORD = re.compile(r"[^\W_]+")
#: :data:`_WORD` on lower-case ASCII text (the same runs, matched faster)
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_LONG_WORD = re.compile(rf"[^\W_]{{{MAX_TERM + 1}}}")
_LATIN_END = "\u0370"  # marks are stripped from letters below Greek: Latin and IPA

# The Snowball project's English stop words, plus the pieces its contractions split
# into here ("don't" -> "don", "t"; "I'm" -> "i", "m").
STOP_WORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
        "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
        "by", "can", "cannot", "could", "did", "do", "does", "doing", "down", "during", "each",
        "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here",
        "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it",
        "its", "itself", "me", "more", "most", "my", "myself", "no", "nor", "not", "of", "off",
        "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over",
        "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
        "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
        "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when",
        "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
        "yours", "yourself", "yourselves", "s", "t", "d", "ll", "m", "re", "ve", "don", "didn",
        "doesn", "isn", "aren", "wasn", "weren", "hasn", "haven", "hadn", "wouldn", "shouldn",
        "couldn", "mustn", "shan",
    ]
)  # fmt: skip


def check_language(language: str, field: str = "text_search") -> str:
    """The language as stored (lower case), or InvalidInput naming ``field``."""
    name = language.strip().lower()
    if name not in LANGUAGES:
        raise InvalidInput(
            f"{field} {quoted(language)} is not a text-search language; "
            f"use one of {', '.join(LANGUAGES)}"
        )
    return name


_local = threading.local()


def _stemmer(language: str) -> Stemmer.Stemmer:
    # One per thread: a PyStemmer object (and the cache of recent words it keeps) is
    # not safe to share between threads.
    stemmers: dict[str, Stemmer.Stemmer] | None = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(language)
    if stemmer is None:
        stemmer = stemmers[language] = Stemmer.Stemmer(language)
    return stemmer


def _fold(word: str) -> str:
    """Lower case, accents of Latin letters removed."""
    word = word.lower()
    if word.isascii():
        return word
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", word):
        if unicodedata.combining(char) and kept and kept[-1] < _LATIN_END:
            continue
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order (no stop words removed, nothing stemmed)."""
    if text.isascii():  # folding is lower case alone: once for the text, not per word
        found: list[str] = _ASCII_WORD.findall(text.lower())
        if _LONG_WORD.search(text) is None:  # nearly always: no word to cut
            return found
        return [word[:MAX_TERM] for word in found]
    text = unicodedata.normalize("NFC", text)
    return [_fold(word)[:MAX_TERM] for word in _WORD.findall(text)]


#: A thread's stems of the words it has seen, per language (a stop word: None): a
#: corpus repeats its words, and each is stemmed once instead of once per document.
#: Cleared when it reaches this many words.
MAX_STEMS = 20_000


def _stems(language: str) -> dict[str, str | None]:
    stems: dict[str, dict[str, str | None]] | None = getattr(_local, "stems", None)
    if stems is None:
        stems = _local.stems = {}
    found = stems.get(language)
    if found is None or len(found) >= MAX_STEMS:
        found = stems[language] = {}
    return found


def terms(text: str, language: str) -> list[str]:
    """The terms of ``text`` in order, repeats kept: what a document indexes."""
    found = words(text)
    if language == SIMPLE:
        return found
    stems = _stems(language)
    if not all(map(stems.__contains__, found)):
        _stem_new(stems, found, language)
    return [stem for stem in map(stems.__getitem__, found) if stem is not None]


def _stem_new(stems: dict[str, str | None], found: list[str], language: str) -> None:
    """Adds the stems of the words of ``found`` that ``stems`` lacks (a stop word: None)."""
    new = list(dict.fromkeys(word for word in found if word not in stems))
    kept = [word for word in new if word not in STOP_WORDS]
    stems.update(dict.fromkeys(new))
    stemmed = _stemmer(language).stemWords(kept)
    stems.update(zip(kept, [stem[:MAX_TERM] for stem in stemmed], strict=True))


def query_terms(text: str, language: str) -> list[str]:
    """The distinct terms of a query, in order: what a search matches (any of them)."""
    return list(dict.fromkeys(terms(text, language)))


def term_counts_of(texts: Iterable[str], language: str) -> list[tuple[Counter[str], int]]:
    """:func:`term_counts` of each text (a batch's documents, in one pass)."""
    if language == SIMPLE:
        found_all = [words(text) for text in texts]
    else:
        found_all = []
        stems = _stems(language)
        get, seen = stems.__getitem__, stems.__contains__
        for text in texts:
            found = words(text)
            if not all(map(seen, found)):  # a word not seen yet: stemmed with the rest
                _stem_new(stems, found, language)
            found_all.append([stem for stem in map(get, found) if stem is not None])
    out = []
    for found in found_all:
        counts: Counter[str] = Counter()
        _count_elements(counts, found)
        out.append((counts, len(found)))
    return out


def term_counts(text: str, language: str) -> tuple[Counter[str], int]:
    """Each term's count in ``text`` and the text's length in terms."""
    found = terms(text, language)
    counts: Counter[str] = Counter()
    _count_elements(counts, found)  # what Counter(found) does, past its type checks
    return counts, len(found)

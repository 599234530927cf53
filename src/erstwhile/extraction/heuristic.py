"""The ``heuristic`` extractor: deterministic, in-process, no configuration.

It finds capitalised names (``Ada Lovelace``, ``PostgreSQL``), ``@handles`` and
`code spans`, and reads a fact when a phrase of a fixed table stands alone between
two names in one sentence: "Ada works on Erstwhile", "Erstwhile depends on `sqlite3`".
A phrase also says what its ends are (who works on what is a person and a project);
a handle is a person and a code span a tool; everything else is ``other``. Modest on
purpose: it never guesses across sentences and never invents a name, and a lone
capitalised word opening a sentence is a name only if the text names it elsewhere too
or a phrase makes it part of a fact.

Code is not prose: a code span is a name only when it looks like one (``sqlite3``,
``git-log``, not ``--local`` or ``(or``), a word glued to a sigil (``$HOME``,
``@ARGV``, ``%hash``) is a variable, a single capital letter is an initial or a
placeholder, and common words that open sentences and list items ("Fix", "Updated",
"Various") are grammar, like the stop words.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from erstwhile.domain.graph import OTHER_KIND
from erstwhile.extraction.base import Extractor

CONFIDENCE = 0.8

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_CODE = re.compile(r"`([^`\n]{1,100})`")
#: A code span that names something: an identifier, maybe dotted, dashed or versioned,
#: or up to three of them (a command: ``git fetch``); not an option, a path or a snippet.
_IDENTIFIER = r"[A-Za-z_]\w*(?:[.+#-]+\w+)*[+#]*"
_CODE_NAME = re.compile(rf"{_IDENTIFIER}(?: {_IDENTIFIER}){{0,2}}")
#: ``@ada``, ``@JohnDoe``; not ``x@y.z``, ``$@``, or an all-capitals Perl array (``@ARGV``).
_HANDLE = re.compile(
    r"(?<![\w@$%&*./:\\-])@(?![A-Z_][A-Z0-9_]*(?![\w.-]))"
    r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,37}[A-Za-z0-9_])?(?![\w(\[{])"
)
#: Hyphenated and quoted parts are capitalised (Coca-Cola, O'Brien; not Windows-specific,
#: Apple's); dotted ones need not be (Node.js, ASP.NET).
_WORD = r"[A-Z][A-Za-z0-9]*(?:[+#]+|(?:[-'][A-Z0-9][A-Za-z0-9]*|\.[A-Za-z0-9]+)*)"
#: A version number may end a name: Windows 11, Python 3.11, Apollo 13.
_NUMBER = r"[ \t]+\d+(?:\.\d+)*(?![\w]|\.\w)"
_NAME = re.compile(rf"(?<![\w@`$%&\\/.:=<>~-]){_WORD}(?:[ \t]+{_WORD})*(?:{_NUMBER})?(?![\w(])")
#: Before the first word of a sentence or list item: bullets, numbering, quotes.
_OPENING = re.compile(r"[\s*+\-#>\"'(\[]*(?:\d+[.)][ \t]+)?")
_FILLER = frozenset(
    {"also", "now", "still", "actively", "mainly", "heavily", "directly", "which", "who", "that"}
)

# Capitalised for grammar, not because they name something.
_STOP_WORDS = """a an the this that these those it its he she they we i you me him her us them
our my his their your in on at by for with from to of and but or nor if when while after
before since until as so yet then there here today yesterday tomorrow also yes no not please
what which who whom whose where why how all any each every some many most much few monday
tuesday wednesday thursday friday saturday sunday january february march april may june
july august september october november december nothing something everything anything
nobody somebody everybody someone everyone
fix fixes fixed fixing add adds added adding update updates updated updating remove removes
removed removing use uses used using allow allows allowed avoid avoids avoided make makes
made change changes changed improve improves improved support supports supported teach
teaches taught rename renames renamed introduce introduces introduced correct corrected
clean cleaned document documented note notes see read run runs let lets give gives given
various recent more less other another new old many several both either neither such same
however although though because thus hence instead otherwise meanwhile later earlier
first second finally also often sometimes usually previously currently earlier now
alternatively additionally similarly optionally again signed acked reviewed tested helped
reported suggested mon tue wed thu fri sat sun jan feb mar apr jun jul aug sep sept oct nov
dec"""
_STOP = frozenset(_STOP_WORDS.split())

# phrase -> (predicate, kind of the subject, kind of the object); None leaves it open
_PHRASES: dict[str, tuple[str, str | None, str | None]] = {}
for _phrases, _fact in (
    ("works on|work on|is working on|worked on|contributes to|maintains|leads|hacks on"
     "|develops|builds", ("works_on", "person", "project")),
    ("is a member of|is member of|member of|joined|works at|works for|is employed by",
     ("member_of", "person", "organization")),
    ("depends on|depend on|requires|relies on|is built on", ("depends_on", "project", "tool")),
    ("uses|use|is using|used|runs on|is written in", ("uses", None, "tool")),
    ("owns|own", ("owns", None, None)),
    ("is part of|is a part of|belongs to|is a component of", ("part_of", None, None)),
    ("is located in|is based in|located in|based in|lives in", ("located_in", None, "place")),
    ("is related to|relates to", ("related_to", None, None)),
):  # fmt: skip
    for _words in _phrases.split("|"):
        _PHRASES[_words] = _fact


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    name: str
    kind: str | None


def _names(sentence: str) -> list[_Span]:
    """The names of one sentence, in order, none overlapping (code, then handles)."""
    spans: list[_Span] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s.start or start >= s.end for s in spans)

    for match in _CODE.finditer(sentence):
        name = match.group(1).strip()
        if _CODE_NAME.fullmatch(name):
            spans.append(_Span(match.start(), match.end(), name, "tool"))
    for match in _HANDLE.finditer(sentence):
        if free(match.start(), match.end()):
            spans.append(_Span(match.start(), match.end(), match.group(0), "person"))
    for match in _NAME.finditer(sentence):
        if not free(match.start(), match.end()):
            continue
        words = match.group(0).split()
        start = match.start()
        while words and words[0].lower() in _STOP:  # "The Apollo project" -> "Apollo"
            start = sentence.index(words[0], start) + len(words[0])
            words.pop(0)
        if _named(words):
            start = sentence.index(words[0], start)
            spans.append(_Span(start, match.end(), " ".join(words), None))
    return sorted(spans, key=lambda s: s.start)


def _named(words: list[str]) -> bool:
    """Whether the words left of a capitalised run name something: not a lone capital
    letter (an initial, a placeholder) and not a bare number."""
    if not words or words[0][0].isdigit():
        return False
    return len(words) > 1 or len(words[0]) > 1


def _phrase(between: str) -> tuple[str, str | None, str | None] | None:
    words = between.strip(" \t,:").lower().split()
    while words and words[0] in _FILLER:
        words.pop(0)
    return _PHRASES.get(" ".join(words)) if words else None


class HeuristicExtractor(Extractor):
    """Names, handles, code spans and a phrase table; the same text, the same answer."""

    provider = "heuristic"

    def _extract(self, text: str) -> dict[str, Any]:
        kinds: dict[str, str | None] = {}
        facts: list[dict[str, Any]] = []
        # A lone capitalised word opening a sentence ("Lunch was good") is grammar
        # unless the text also names it elsewhere or a phrase makes it part of a fact.
        openers: set[str] = set()
        named: set[str] = set()
        for sentence in _SENTENCE.split(text):
            spans = _names(sentence)
            opening = _OPENING.match(sentence)
            first = opening.end() if opening else 0
            for span in spans:
                kinds.setdefault(span.name, span.kind)
                lone = span.kind is None and " " not in span.name and span.start == first
                (openers if lone else named).add(span.name)
            for left, right in itertools.pairwise(spans):
                found = _phrase(sentence[left.end : right.start])
                if found is None or left.name == right.name:
                    continue
                predicate, subject_kind, object_kind = found
                for name, kind in ((left.name, subject_kind), (right.name, object_kind)):
                    named.add(name)
                    if kind is not None and kinds.get(name) is None:
                        kinds[name] = kind
                facts.append(
                    {"subject": left.name, "predicate": predicate, "object": right.name,
                     "confidence": CONFIDENCE}
                )  # fmt: skip
        entities = [
            {"name": name, "kind": kind or OTHER_KIND}
            for name, kind in kinds.items()
            if name in named or name not in openers
        ]
        return {"entities": entities, "facts": facts}

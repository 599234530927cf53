"""Chunking: structure first (headings, paragraphs, definitions), bounded size, no text
lost, overlap only where a block had to be cut, and chunks that do not shift when a
paragraph is inserted above them."""

from __future__ import annotations

import itertools
import re

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from erstwhile.jobs.chunking import (
    MAX_CHARS,
    MIN_CHARS,
    OVERLAP,
    Chunk,
    DocumentKind,
    chunk_document,
    document_kind,
)

MD, TEXT, CODE = DocumentKind.MARKDOWN, DocumentKind.TEXT, DocumentKind.CODE


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


def test_markdown_by_heading_path_then_paragraph() -> None:
    long = "word " * 80  # each paragraph over MIN_CHARS: a chunk of its own
    text = (
        f"Intro {long}\n\n# Guide\n\nFirst {long}\n\nSecond {long}\n\n## Install\n\n"
        f"Steps {long}\n\n# Other\nsub title\n---------\n\nLast {long}"
    )
    chunks = chunk_document(text, MD)
    assert [c.section for c in chunks] == [
        "", "Guide", "Guide", "Guide > Install", "Other > sub title",
    ]  # fmt: skip
    assert chunks[3].content.startswith("Guide > Install\n\nSteps word")
    assert chunks[0].content.startswith("Intro word")


def test_a_heading_with_nothing_under_it_is_still_a_chunk() -> None:
    chunks = chunk_document("# Plan\n\n## Done\n\n## Later\n\nsoon\n\n## TODO\n", MD)
    assert [(c.section, c.content) for c in chunks] == [
        ("Plan > Done", "Plan > Done"),
        ("Plan > Later", "Plan > Later\n\nsoon"),
        ("Plan > TODO", "Plan > TODO"),
    ]


def test_markdown_small_paragraphs_are_packed_and_fences_stay_whole() -> None:
    text = (
        "# Notes\n\none\n\ntwo\n\n```python\n# not a heading\n\ndef f():\n    pass\n```\n\n"
        "## Empty\n## Next\n\nthree\n"
    )
    chunks = chunk_document(text, MD)
    assert chunks == [
        Chunk("Notes\n\none\n\ntwo\n\n```python\n# not a heading\n\ndef f():\n    pass\n```",
              "Notes"),
        Chunk("Notes > Empty", "Notes > Empty"),
        Chunk("Notes > Next\n\nthree", "Notes > Next"),
    ]  # fmt: skip


def test_front_matter_is_one_block() -> None:
    chunks = chunk_document("---\ntitle: x\n\nnote: y\n---\n# Head\n\nbody\n", MD)
    assert chunks[0] == Chunk("---\ntitle: x\n\nnote: y\n---", "")


def test_code_by_top_level_definition() -> None:
    source = (
        "import os\nimport sys\n\n\n@decorator\ndef first(x):\n    y = x\n\n    return y\n\n\n"
        "class Second:\n    def method(self):\n        pass\n\n\nasync def third():\n"
        "    pass\n\nfunc (r *T) Fourth() {\n\treturn\n}\n"
    )
    chunks = chunk_document(source, CODE)
    assert [c.section for c in chunks] == ["", "first", "Second", "third", "Fourth"]
    assert chunks[1].content == "@decorator\ndef first(x):\n    y = x\n\n    return y"
    assert chunks[4].content == "func (r *T) Fourth() {\n\treturn\n}"


def test_a_long_block_is_cut_into_overlapping_windows() -> None:
    text = " ".join(f"Sentence {n} jumps over dog {n * 7}." for n in range(300))
    chunks = chunk_document(text, TEXT)
    assert len(chunks) > 3
    for before, after in itertools.pairwise(chunks):
        assert len(before.content) <= MAX_CHARS
        shared = after.content[:30]
        assert shared in before.content  # the next window starts inside this one
        assert len(before.content) - before.content.index(shared) <= OVERLAP + 20
    for n in range(300):
        assert any(f"Sentence {n} jumps over dog {n * 7}." in c.content for c in chunks)


def test_document_kinds() -> None:
    kinds = {name: document_kind(name) for name in
             ("a.md", "b.MDX", "c.txt", "README", "d.py", "e.rs", "Makefile", "f.png")}  # fmt: skip
    assert kinds == {"a.md": MD, "b.MDX": MD, "c.txt": TEXT, "README": TEXT, "d.py": CODE,
                     "e.rs": CODE, "Makefile": CODE, "f.png": None}  # fmt: skip


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="min_chars"):
        chunk_document("x", TEXT, max_chars=100, min_chars=200)


# -- properties ------------------------------------------------------------------------

word = st.text("abcdefghij", min_size=1, max_size=12)
paragraph = st.lists(word, min_size=1, max_size=400).map(" ".join)
heading = st.tuples(st.integers(1, 3), st.lists(word, min_size=1, max_size=4).map(" ".join))
markdown = st.lists(st.one_of(paragraph, heading), max_size=12).map(
    lambda blocks: "\n\n".join(b if isinstance(b, str) else "#" * b[0] + " " + b[1] for b in blocks)
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        markdown.map(lambda t: (t, MD)),
        st.lists(paragraph, max_size=8).map(lambda p: ("\n\n".join(p), TEXT)),
    )
)
def test_chunks_are_bounded_and_lose_no_word(case: tuple[str, DocumentKind]) -> None:
    text, kind = case
    chunks = chunk_document(text, kind)
    assert all(len(c.content) <= MAX_CHARS for c in chunks)
    assert all(c.content.strip() for c in chunks)
    assert words(text) <= set().union(*(words(c.content) for c in chunks))
    assert chunk_document(text, kind) == chunks  # a pure function of the text


long_paragraph = (
    st.lists(st.text("abcdefghij", min_size=4, max_size=10), min_size=60, max_size=130)
    .map(" ".join)
    .filter(lambda p: MIN_CHARS <= len(p) <= MAX_CHARS)
)


@settings(max_examples=100, deadline=None)
@given(st.lists(long_paragraph, min_size=1, max_size=6),
       st.lists(word, min_size=1, max_size=100).map(" ".join))  # fmt: skip
def test_inserting_at_the_top_leaves_the_chunks_below_it_alone(
    paragraphs: list[str], inserted: str
) -> None:
    """A long paragraph inserted at the top is a chunk of its own; a short one is packed
    with the first paragraph. Either way every chunk after the first is untouched."""
    before = chunk_document("\n\n".join(paragraphs), TEXT)
    after = chunk_document("\n\n".join([inserted, *paragraphs]), TEXT)
    assert len(after) in (len(before), len(before) + 1)
    assert after[len(after) - len(before) + 1 :] == before[1:]
    if len(inserted) >= MIN_CHARS:
        assert after[1:] == before

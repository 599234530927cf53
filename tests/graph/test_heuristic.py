"""The heuristic extractor and the one normaliser of provider output."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import erstwhile
from erstwhile.domain.graph import (
    MAX_ENTITIES,
    MAX_FACTS,
    ExtractedEntity,
    ExtractedFact,
    normalise_extraction,
)
from erstwhile.extraction import HeuristicExtractor
from erstwhile.extraction.heuristic import _STOP

CORPUS = Path(__file__).parent / "corpus" / "team.md"

PEOPLE = {"Ada Lovelace", "Grace Hopper", "@linus", "Bob"}
PROJECTS = {"Erstwhile", "Compiler Toolkit", "Kernel Tools"}
FACTS = {
    ("Ada Lovelace", "works_on", "Erstwhile"),
    ("Erstwhile", "depends_on", "SQLite"),
    ("Grace Hopper", "works_on", "Compiler Toolkit"),
    ("Compiler Toolkit", "uses", "LLVM"),
    ("Erstwhile", "uses", "numpy"),
    ("@linus", "works_on", "Kernel Tools"),
    ("Kernel Tools", "depends_on", "GCC"),
    ("Apollo Project", "located_in", "Houston"),
    ("Bob", "member_of", "Globex Corp"),
}


def test_the_corpus_through_the_store(store_target: str) -> None:
    paragraphs = [p for p in CORPUS.read_text().split("\n\n") if p.strip()]
    with erstwhile.open(store_target, embedder="none", extractor="heuristic",
                        background_jobs=False) as m:  # fmt: skip
        m.upsert("corpus", [{"content": p} for p in paragraphs])
        assert m.extract("corpus").extracted == len(paragraphs)
        entities = {e.id: e for e in m.entities("corpus")}
        kinds = {e.name: e.kind for e in entities.values()}
        found = {
            (entities[r.subject].name, r.predicate, entities[r.object].name)
            for r in m.service.store.graph.relationships("corpus", None, None)
        }
    assert found == FACTS
    assert {name for name, kind in kinds.items() if kind == "person"} == PEOPLE
    assert {name for name, kind in kinds.items() if kind == "project"} == PROJECTS
    assert {name for name, kind in kinds.items() if kind == "tool"} >= {"SQLite", "numpy", "GCC"}
    assert kinds["Houston"] == "place" and kinds["Globex Corp"] == "organization"
    assert not {"March", "Monday", "Nothing", "The"} & set(kinds)


def test_deterministic_and_modest() -> None:
    extractor = HeuristicExtractor()
    text = CORPUS.read_text()
    assert extractor.extract(text) == extractor.extract(text)
    # a phrase must stand alone between two names of one sentence
    nothing = extractor.extract("Ada said that she works on. Erstwhile was mentioned.")
    assert nothing.facts == ()
    assert extractor.extract("Ada and Bob work on many things").facts == ()
    assert extractor.extract("no names here at all").entities == ()
    assert extractor.extract("Lunch was good. Dinner too").entities == ()
    names = {e.name for e in extractor.extract("Redis is fast. We like Redis").entities}
    assert names == {"Redis"}  # named again mid-sentence: a name after all


def test_normalise_reads_provider_output_into_the_closed_vocabulary() -> None:
    raw = {
        "entities": [
            {"name": " Ada ", "kind": "Person"},
            {"name": "Erstwhile", "kind": "software"},  # unknown kind
            {"name": "Ada", "kind": "tool"},  # a second listing of a name: the first wins
            {"name": "", "kind": "person"},
            "not an object",
            {"name": "SQLite", "kind": "tool", "aliases": ["sqlite3", 7, "SQLite"]},
        ],
        "facts": [
            {"subject": "Ada", "predicate": "Works On", "object": "Erstwhile",
             "confidence": 0.9},
            {"subject": "Erstwhile", "predicate": "is built with", "object": "SQLite"},
            {"subject": "Ada", "predicate": "uses", "object": "Nobody"},  # unlisted end
            {"subject": "Ada", "predicate": "uses", "object": "Ada"},  # self-loop
            {"subject": "Ada", "predicate": "owns", "object": "SQLite", "confidence": math.nan},
            {"subject": "Ada", "predicate": "owns", "object": "SQLite", "confidence": True},
            {"subject": "SQLite", "predicate": "part-of", "object": "Ada", "confidence": 0.2},
            {"subject": "SQLite", "predicate": "part_of", "object": "Erstwhile",
             "confidence": 7},
        ],
    }  # fmt: skip
    found = normalise_extraction(raw, min_confidence=0.5)
    assert found.entities == (
        ExtractedEntity("Ada", "person"),
        ExtractedEntity("Erstwhile", "other"),
        ExtractedEntity("SQLite", "tool", ("sqlite3",)),
    )
    assert found.facts == (
        ExtractedFact("Ada", "works_on", "Erstwhile", 0.9),
        ExtractedFact("Erstwhile", "related_to", "SQLite", 1.0),
        ExtractedFact("SQLite", "part_of", "Erstwhile", 1.0),  # capped at 1
    )
    for junk in (None, [], "text", {"entities": "x", "facts": 3}):
        assert normalise_extraction(junk).entities == ()


def test_normalise_caps_sizes() -> None:
    many = {"entities": [{"name": f"E{i}"} for i in range(MAX_ENTITIES * 2)],
            "facts": [{"subject": f"E{i}", "predicate": "uses", "object": f"E{j}"}
                      for i in range(30) for j in range(30)]}  # fmt: skip
    found = normalise_extraction(many)
    assert len(found.entities) == MAX_ENTITIES and len(found.facts) == MAX_FACTS
    long = normalise_extraction({"entities": [{"name": "x" * 500}]})
    assert len(long.entities[0].name) == 200


CHANGELOG = Path(__file__).parent / "corpus" / "changelog.md"


def test_code_and_grammar_are_not_entities() -> None:
    found = HeuristicExtractor().extract(CHANGELOG.read_text())
    names = {e.name: e.kind for e in found.entities}
    # sigils, option flags, punctuation fragments, list-item verbs, lone capitals
    junk = ["@ARGV", "ARGV", "$HOME", "HOME", "%ENV", "ENV", "PATH", "--local", "-l", "(or"]
    junk += ["Fix", "Updated", "Various", "Added", "Use", "Teach", "Later", "B", "X"]
    assert not set(junk) & set(names)
    assert names["Windows 11"] == names["Windows 10"] == "other"  # the version is the name
    assert {"Python 3.11", "Perl", "C++", "Ada Lovelace", "Grace Hopper"} <= set(names)
    assert names["harbor-sync"] == names["libgit2"] == names["harbor mirror create"] == "tool"
    assert names["@octocat"] == "person"
    assert {(f.subject, f.predicate, f.object) for f in found.facts} == {
        ("Harbor", "depends_on", "libgit2"),
        ("Ada Lovelace", "works_on", "Harbor"),
        ("Harbor", "uses", "Python 3.11"),
    }


_TOKENS = ["Ada", "Lovelace", "Fix", "Updated", "the", "The", "@ARGV", "$HOME", "%h", "(or",
           "`--x`", "`ok`", "*", "-", "1.", "B", "11", "3.2", "uses", "Erstwhile", ".", ",",
           "\n", "@ada", "(", ")", "Windows", "Various", "x@y.z"]  # fmt: skip


@given(st.lists(st.sampled_from(_TOKENS), max_size=40).map(" ".join))
def test_every_entity_looks_like_a_name(text: str) -> None:
    for entity in HeuristicExtractor().extract(text).entities:
        name = entity.name
        assert name[0].isupper() or entity.kind in ("tool", "person"), name
        assert name[0] not in "$%(-*" and name.lower() not in _STOP, name
        assert len(name) > 1 and not name[0].isdigit(), name
        if entity.kind == "person" and name.startswith("@"):
            assert not name[1:].isupper(), name  # @ARGV is Perl's, not a person


def test_name_shapes() -> None:
    text = (
        "We use Node.js and ASP.NET here. The Windows-specific code in Git.pm is Apple's, "
        "says O'Brien at Coca-Cola. It ends in Python. In 2019 we moved."
    )
    names = [e.name for e in HeuristicExtractor().extract(text).entities]
    assert names == ["Node.js", "ASP.NET", "Windows", "Git.pm", "Apple", "O'Brien", "Coca-Cola",
                     "Python"]  # fmt: skip

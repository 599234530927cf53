"""Entity resolution, table-driven: every case of SPEC §8, the ambiguous one included.

Each row starts from the same known entities, resolves one name, and says where it
must land: on a known entity (converges), or on a new one, and if so which known
entities it is linked to by possibly_same_as. The same table then runs through the
store on both backends (asserted mentions), where the links must be stored."""

from __future__ import annotations

import pytest

import erstwhile
from erstwhile.domain.graph import Entity, entity_id
from erstwhile.extraction.resolution import Resolver, fold, one_edit_apart

NS = "res"
KNOWN = [  # (name, kind, aliases)
    ("Ada Lovelace", "person", ()),
    ("Erstwhile", "project", ("EW", "erst while")),
    ("Postgres", "tool", ()),
    ("Mercury", "place", ()),
    ("Bob", "person", ()),
    ("Kubernetes", "tool", ()),
    ("Jonathan", "person", ()),
    ("Jonathens", "person", ()),  # two edits from Jonathan, one each from "Jonathen"
    ("Maria Garcia", "person", ()),
    ("Windows 10", "tool", ()),
    ("Python 3.11", "tool", ()),
    ("Globex Corporation", "organization", ()),
]


def known() -> list[Entity]:
    return [Entity(entity_id(NS, n, k), n, k, tuple(a)) for n, k, a in KNOWN]


def eid(name: str) -> str:
    kind = next(k for n, k, _ in KNOWN if n == name)
    return entity_id(NS, name, kind)


# (name as spelled, kind given, the entity it converges on | None, possibly_same_as)
CASES = [
    ("Ada Lovelace", "person", "Ada Lovelace", []),  # exact
    ("ada lovelace", "person", "Ada Lovelace", []),  # case
    ("ADA LOVELACE", "other", "Ada Lovelace", []),  # case; unclassified fits any kind
    ("Ada-Lovelace", "person", "Ada Lovelace", []),  # punctuation
    ("Ada  Lovelace.", "person", "Ada Lovelace", []),  # spacing and punctuation
    ("AdaLovelace", "person", "Ada Lovelace", []),  # spacing
    ("@ada_lovelace", "person", "Ada Lovelace", []),  # a handle: punctuation
    ("EW", "project", "Erstwhile", []),  # a recorded alias
    ("Erst-While", "other", "Erstwhile", []),  # an alias's variant
    ("Erstwhyle", "project", "Erstwhile", []),  # one substitution, name of 9
    ("Erstwhil", "project", "Erstwhile", []),  # one deletion
    ("Erstwhille", "project", "Erstwhile", []),  # one insertion
    ("Postgress", "tool", "Postgres", []),  # typo of a name of exactly six or more (8)
    ("Kubernetis", "other", "Kubernetes", []),
    ("Bobb", "person", None, []),  # typo of a name under six characters: distinct
    ("Ertswhile", "project", None, []),  # two edits (a transposition): distinct
    ("Erstwhyle", "place", None, []),  # close, but another kind: distinct, no link
    ("Mercury", "tool", None, ["Mercury"]),  # same name, another kind: ambiguous
    ("Jonathen", "person", None, ["Jonathan", "Jonathens"]),  # one typo from two: ambiguous
    ("Grace Hopper", "person", None, []),  # nobody known
    # issue #42: a missed merge rather than a wrong one
    ("Mario Garcia", "person", None, ["Maria Garcia"]),  # a given name differs: linked only
    ("Mario Garcia", "other", None, ["Maria Garcia"]),  # the known one is a person
    ("Maria Garcya", "person", None, ["Maria Garcia"]),  # a typo in a word under 8: linked
    ("Windows 11", "tool", None, []),  # another number: another thing, not even linked
    ("Windows11", "other", None, []),
    ("windows-10", "tool", "Windows 10", []),  # the same number, spelled otherwise
    ("Python 3.12", "tool", None, []),
    ("Python 31.1", "tool", None, []),  # the same digits, another number
    ("Globex Corporaton", "organization", "Globex Corporation", []),  # typo in a long word
    ("Globex Corporations", "other", "Globex Corporation", []),
]


@pytest.mark.parametrize(("name", "kind", "lands", "links"), CASES)
def test_resolution(name: str, kind: str, lands: str | None, links: list[str]) -> None:
    resolver = Resolver(NS, known())
    resolution = resolver.resolve(name, kind)
    if lands is not None:
        assert resolution.entity == eid(lands) and resolution.created is None
        assert resolution.same_as == ()
    else:
        assert resolution.created is not None
        assert (resolution.created.name, resolution.created.kind) == (name, kind)
        assert resolution.entity not in {e.id for e in known()}
        assert resolution.same_as == tuple(sorted(eid(n) for n in links))


def test_the_same_name_again_converges_on_the_entity_it_created() -> None:
    resolver = Resolver(NS, known())
    first = resolver.resolve("Jonathen", "person")
    again = resolver.resolve("jonathen", "person")
    assert again.entity == first.entity and again.created is None


def test_an_unclassified_entity_learns_its_kind() -> None:
    resolver = Resolver(NS, [])
    created = resolver.resolve("Zephyr", "other")
    learnt = resolver.resolve("zephyr", "project")
    assert learnt.entity == created.entity and learnt.kind == "project"
    assert resolver.get(created.entity).kind == "project"


def test_fold_and_edit_distance() -> None:
    assert fold(" Ada-Love lace! ") == "adalovelace"
    assert fold("Python 3.11") == "python3.11" != fold("Python 31.1") == "python31.1"
    assert fold("Windows 10") == fold("windows10") and fold("Node.js") == "nodejs"
    assert fold("C++") == "c++" and fold("C#") != fold("C")
    assert one_edit_apart("abcdef", "abcxef") and one_edit_apart("abcdef", "abcdf")
    assert not one_edit_apart("abcdef", "abcdef") and not one_edit_apart("abcdef", "badcef")


@pytest.mark.parametrize(("name", "kind", "lands", "links"), CASES)
def test_resolution_in_the_store(
    store_target: str, name: str, kind: str, lands: str | None, links: list[str]
) -> None:
    with erstwhile.open(store_target, embedder="none", background_jobs=False) as m:
        m.add(NS, "the known ones", id="known", kind="seed")
        m.mention(NS, "known", [{"name": n, "kind": k, "aliases": list(a)} for n, k, a in KNOWN])
        m.add(NS, "a new record", id="new")
        (made,) = m.mention(NS, "new", [{"name": name, "kind": kind}])
        # the record's own spelling (runs of spaces tidied), whatever it resolved to
        assert made.spelling == " ".join(name.split())
        entity = m.entity(NS, made.entity)
        if lands is not None:
            assert made.entity == eid(lands)
        else:
            assert entity["name"] == made.spelling and made.entity not in {e.id for e in known()}
        assert entity["possibly_same_as"] == sorted(eid(n) for n in links)
        assert len(m.entities(NS)) == len(KNOWN) + (lands is None)  # nothing merged

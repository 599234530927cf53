"""The data the inspector tests and screenshots look at: a namespace with a fact that
was superseded, one invalidated, one deleted, one not yet valid, a hostile one, notes
read into the graph, and an asserted relationship. Written with the Python API into the
server's database file before the server starts, extraction run to the end."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import erstwhile

NS = "team"
XSS = "<script>alert(1)</script>"
CONFIG = '[embedding]\nprovider = "hash"\n\n[extraction]\nprovider = "heuristic"\n'


@dataclass(frozen=True)
class Seeded:
    acme: str  # "Alice works at Acme", superseded by ...
    globex: str  # ... "Alice works at Globex" (valid from 2024-06-01)
    invalidated: str
    deleted: str
    xss: str
    ada: str  # the entity id of Ada


def seed(db: Path) -> Seeded:
    with erstwhile.open(db, embedder="hash", extractor="heuristic", background_jobs=False) as m:
        acme = m.add(NS, "Alice works at Acme", key="alice.employer", valid_from="2023-01-01",
                     tags=["work"], metadata={"team": "core", "priority": "3"})  # fmt: skip
        globex = m.supersede(NS, acme, {"content": "Alice works at Globex",
                                        "valid_from": "2024-06-01"}).ids[0]  # fmt: skip
        bob = m.add(NS, "Bob leads the Apollo launch", key="apollo.lead", valid_from="2023-03-01")
        m.invalidate(NS, bob, at="2024-02-01")
        carol = m.add(NS, "Carol sits on floor 3", valid_from="2023-08-01")
        m.delete(NS, carol)
        # not yet valid whenever the tests run: a fixed date would come true one day
        move = (datetime.now(UTC).date() + timedelta(days=90)).isoformat()
        m.add(NS, "The team moves to the Berlin office", valid_from=move)
        note = m.add(NS, "Ada works on Apollo. Apollo depends on Redis.", valid_from="2023-05-01")
        m.extract(NS)  # the graph as the first note tells it; the revision closes its facts
        m.supersede(NS, note, {"content": "Ada works on Hermes. Hermes depends on Redis.",
                               "valid_from": "2024-09-01"})  # fmt: skip
        xss = m.add(NS, XSS, key="hostile", valid_from="2024-01-01")
        m.extract(NS)
        m.assert_fact(NS, "Ada", "mentors", "Grace", valid_from="2024-02-01")
        m.mention(NS, xss, [{"name": "Ada", "kind": "person"}])  # hostile text, mentioning
        ada = next(e.id for e in m.entities(NS, "Ada") if e.name == "Ada")
        m.add("ops", "The nightly backup runs at 02:00 UTC", valid_from="2024-03-01")
    return Seeded(acme, globex, bob, carol, xss, ada)

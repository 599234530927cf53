"""Time-awareness: a generated knowledge-update set, asked "now" and "as of" a date.

500 subjects — 250 made-up people x 2 attributes each (home city, employer, car, pet,
sport, profession) — each with 3-5 successive facts over two years (2023-2024), every
fact written as a record that supersedes the previous one, at midnight UTC of its day
("Ada Park lives in Lyon."). Distractors: two chatter records per person that name a
city or a company and are never superseded ("Ada Park visited Porto for a conference.").

Questions, one of each kind per subject:
- now: "Where does Ada Park live?" — the answer is the subject's latest fact;
- as of: "Where did Ada Park live on 5 March 2024?" — the fact valid on that day, for
  a day drawn inside the validity of one of the subject's earlier facts.

Each question is searched three ways, with every ranking (lexical, semantic with the
``local`` embedder, hybrid), top 1:
- **time options**: erstwhile's default ``current`` for "now", ``as_of=<day>`` for "as
  of" — the question text unchanged;
- **no time options**: the same search with ``include_historical`` (every version, no
  temporal clause) — what a store without validity time returns;
- **no time options, dates in the text**: the same, over a copy of the data whose
  content starts with the fact's date ("Since 5 March 2024, Ada Park lives in Lyon."),
  the best a plain store can do with the date as words.

accuracy@1 = the top hit is the expected fact record. "right subject, wrong time" =
the top hit is another version of the same subject's fact.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np

import erstwhile
from bench.common import latency, log

FIRST = [
    "Ada", "Bram", "Cleo", "Dario", "Edda", "Farid", "Greta", "Hugo", "Ines", "Jonas",
    "Kaia", "Lior", "Mira", "Nico", "Oona", "Pavel", "Quinn", "Rosa", "Sami", "Tove",
    "Ugo", "Vera", "Wim", "Xenia", "Yuri", "Zora", "Anouk", "Bento", "Carys", "Dmitri",
    "Elin", "Fenna", "Gael", "Hanne", "Ivo", "Jules", "Kemal", "Lena", "Milo", "Nadia",
]  # fmt: skip
LAST = [
    "Park", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Ferreira", "Haddad",
    "Kowalski", "Brennan", "Castillo", "Dubois", "Eriksen", "Fischer", "Galli", "Horvat",
    "Ivanova", "Jansen", "Keller", "Laine", "Mendes", "Nakamura", "Olsen", "Petrov",
    "Quint", "Rossi", "Sato", "Toivonen", "Urban", "Varga",
]  # fmt: skip
CITIES = [
    "Lyon", "Porto", "Oslo", "Krakow", "Utrecht", "Bilbao", "Tampere", "Graz", "Turin",
    "Ghent", "Aarhus", "Brno", "Cork", "Leipzig", "Split", "Malmo",
]  # fmt: skip
COMPANIES = [
    "Helix Labs", "Northwind Freight", "Quarry Analytics", "Bluefin Robotics",
    "Cedar Health", "Lumen Grid", "Orchid Games", "Pinecrest Bank", "Stratus Air",
    "Tidewater Foods", "Vantage Optics", "Wildflower Media", "Granite Insurance",
    "Copperleaf Energy", "Harbor Textiles", "Juniper Software",
]  # fmt: skip
ATTRIBUTES: dict[str, tuple[str, str, str, list[str]]] = {
    # attribute: (fact, question now, question as of, values)
    "city": ("{name} lives in {value}.", "Where does {name} live?",
             "Where did {name} live on {date}?", CITIES),
    "employer": ("{name} works at {value}.", "Where does {name} work?",
                 "Where did {name} work on {date}?", COMPANIES),
    "car": ("{name} drives a {value}.", "What car does {name} drive?",
            "What car did {name} drive on {date}?",
            ["red hatchback", "blue estate", "white van", "green convertible", "black SUV",
             "silver coupe", "yellow pickup", "grey sedan", "orange minivan", "vintage roadster",
             "electric scooter", "camper van"]),
    "pet": ("{name} has a pet {value}.", "What pet does {name} have?",
            "What pet did {name} have on {date}?",
            ["beagle", "tabby cat", "parrot", "rabbit", "goldfish", "tortoise", "ferret",
             "collie", "hamster", "iguana", "cockatiel", "dachshund"]),
    "sport": ("{name} plays {value}.", "What sport does {name} play?",
              "What sport did {name} play on {date}?",
              ["tennis", "volleyball", "squash", "handball", "badminton", "rugby", "cricket",
               "water polo", "ice hockey", "table tennis", "basketball", "lacrosse"]),
    "job": ("{name} is a {value} by profession.", "What is {name}'s profession?",
            "What was {name}'s profession on {date}?",
            ["nurse", "carpenter", "architect", "pharmacist", "pilot", "librarian",
             "electrician", "translator", "surveyor", "baker", "geologist", "paramedic"]),
}  # fmt: skip
CHATTER = [
    "{name} visited {city} for a conference.",
    "{name} had lunch with a friend from {company}.",
    "{name} read a long article about {city}.",
    "{name} met a recruiter from {company} at a fair.",
]
START = datetime(2023, 1, 1, tzinfo=UTC)
END = datetime(2024, 12, 20, tzinfo=UTC)
RANKINGS = ("lexical", "semantic", "hybrid")
CONDITIONS = ("time options", "no time options", "no time options, dates in the text")


def day(value: datetime) -> str:
    return value.strftime("%Y-%m-%d")


def spoken(value: datetime) -> str:
    return f"{value.day} {value.strftime('%B %Y')}"


@dataclass
class Question:
    kind: str  # "now" or "as of"
    subject: str
    text: str
    expected: str
    at: datetime | None


def generate(subjects: int, seed: int) -> tuple[list[dict[str, Any]], list[Question]]:
    """Records (with supersession) and questions; ``subjects`` must be even."""
    rng = np.random.default_rng(seed)
    people = [f"{first} {last}" for first in FIRST for last in LAST]
    chosen = [people[i] for i in rng.choice(len(people), subjects // 2, replace=False)]
    records: list[dict[str, Any]] = []
    questions: list[Question] = []
    names = list(ATTRIBUTES)
    for p, name in enumerate(chosen):
        for attribute in rng.choice(names, 2, replace=False):
            fact, ask_now, ask_then, values = ATTRIBUTES[str(attribute)]
            count = int(rng.integers(3, 6))
            gaps = rng.uniform(0.5, 1.5, count)
            span = (END - START).days - 30
            offsets = np.cumsum(gaps / gaps.sum() * span)
            starts = [START + timedelta(days=int(rng.integers(0, 30)) + int(o - offsets[0]))
                      for o in offsets]  # fmt: skip
            picked = [str(v) for v in rng.choice(values, count, replace=False)]
            subject = f"p{p:03d}-{attribute}"
            # ids sort in no particular order within a subject, so a tie between versions
            # is broken as by chance (ids break ties), not always for the oldest
            ids = [f"{subject}-{blake2b(f'{subject}/{k}'.encode(), digest_size=4).hexdigest()}"
                   for k in range(count)]  # fmt: skip
            for k in range(count):
                record: dict[str, Any] = {
                    "id": ids[k],
                    "content": fact.format(name=name, value=picked[k]),
                    "valid_from": day(starts[k]),
                    "kind": "fact",
                    "metadata": {"subject": subject},
                }
                if k:
                    record["supersedes"] = [ids[k - 1]]
                records.append(record)
            questions.append(
                Question("now", subject, ask_now.format(name=name), ids[count - 1], None)
            )
            k = int(rng.integers(0, count - 1))
            width = (starts[k + 1] - starts[k]).days
            at = starts[k] + timedelta(days=int(rng.integers(0, max(width, 1))))
            questions.append(
                Question("as of", subject, ask_then.format(name=name, date=spoken(at)),
                         ids[k], at)
            )  # fmt: skip
        for c in range(2):
            template = CHATTER[int(rng.integers(0, len(CHATTER)))]
            when = START + timedelta(days=int(rng.integers(0, (END - START).days)))
            records.append(
                {"id": f"p{p:03d}-chat-{c}", "kind": "note", "valid_from": day(when),
                 "content": template.format(name=name, city=str(rng.choice(CITIES)),
                                            company=str(rng.choice(COMPANIES)))}
            )  # fmt: skip
    records.sort(key=lambda r: (r["valid_from"], r["id"]))
    return records, questions


def dated(record: dict[str, Any]) -> dict[str, Any]:
    when = datetime.fromisoformat(record["valid_from"]).replace(tzinfo=UTC)
    return {**record, "content": f"Since {spoken(when)}, {record['content']}"}


def run_timeaware(subjects: int = 500, *, seed: int = 11) -> dict[str, Any]:
    started = time.perf_counter()
    records, questions = generate(subjects, seed)
    workdir = Path(tempfile.mkdtemp(prefix="erstwhile-bench-time-"))
    try:
        memory = erstwhile.open(workdir / "time.db", background_jobs=False)
        with memory:
            t = time.perf_counter()
            memory.upsert("plain", records)
            memory.upsert("dated", [dated(r) for r in records])
            write_s = time.perf_counter() - t
            log(f"  time-awareness: {len(records)} records x 2 namespaces in {write_s:.1f} s")
            table, timing = ask(memory, questions)
            return {
                "subjects": subjects,
                "seed": seed,
                "records": len(records),
                "facts": sum(1 for r in records if r["kind"] == "fact"),
                "questions": {
                    k: sum(1 for q in questions if q.kind == k) for k in ("now", "as of")
                },
                "embedder": memory.embedder_id("plain"),
                "conditions": list(CONDITIONS),
                "results": table,
                "search_latency": timing,
                "write_seconds": round(write_s, 1),
                "seconds": round(time.perf_counter() - started, 1),
            }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def ask(
    memory: erstwhile.Memory, questions: list[Question]
) -> tuple[dict[str, Any], dict[str, Any]]:
    right: dict[tuple[str, str, str], list[float]] = {}
    versions: dict[tuple[str, str, str], list[float]] = {}
    times: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for question in questions:
        for ranking in RANKINGS:
            for condition in CONDITIONS:
                options: dict[str, Any] = {"ranking": ranking, "top_k": 1}
                namespace = "plain"
                if condition == "time options":
                    if question.at is not None:
                        options["as_of"] = day(question.at)
                else:
                    options["include_historical"] = True
                    if condition.endswith("in the text"):
                        namespace = "dated"
                t = time.perf_counter()
                ids = memory.search(namespace, question.text, **options).ids()
                times[condition].append(time.perf_counter() - t)
                top = ids[0] if ids else ""
                key = (condition, ranking, question.kind)
                right.setdefault(key, []).append(1.0 if top == question.expected else 0.0)
                wrong_time = top != question.expected and top.startswith(question.subject + "-")
                versions.setdefault(key, []).append(1.0 if wrong_time else 0.0)
    table: dict[str, Any] = {}
    for (condition, ranking, kind), hits in right.items():
        cell = table.setdefault(condition, {}).setdefault(ranking, {})
        cell[kind] = {
            "accuracy_at_1": round(float(np.mean(hits)), 4),
            "right_subject_wrong_time": round(
                float(np.mean(versions[(condition, ranking, kind)])), 4
            ),
            "questions": len(hits),
        }
    return table, {c: latency(v) for c, v in times.items()}

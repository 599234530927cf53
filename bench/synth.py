"""The speed benchmark's data: clustered 384-d vectors, Zipf texts, rooms and validity.

Everything comes from one seeded generator, so every engine sees byte-identical data
and every run the same. Times are fixed instants (the data's "now" is 2025-01-01, in
the past of any run), so "currently valid" means the same rows for every engine.

- vectors: ``CENTRES`` unit cluster centres; a record is its centre plus Gaussian noise
  (sigma = 0.05 per dimension, cosine to its centre ≈ 0.7), L2-normalised, float32.
- texts: 6-14 words. Each word is drawn from a Zipf law (s = 1.07) over a 5,000-word
  pseudo-vocabulary, except that ~30 % come from the record's cluster's 12 topic
  words, so text and vector agree the way a real corpus's do.
- metadata: ``room`` = one of 10 values, uniform.
- validity: ``valid_from`` spread over the two years before "now", increasing with the
  record index (records arrive in time order). ~10 % of records are superseded by a
  later record (which names them in ``supersedes``; the old one is closed at the new
  one's ``valid_from``), another ~10 % are invalidated (``valid_to`` in the past).
- queries: a perturbed cluster centre (sigma = 0.03), a room, and 2-3 words — two of the
  query cluster's topic words and one Zipf word outside the 20 most frequent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

DIMENSIONS = 384
ROOMS = 10
CENTRES = 1000
VOCABULARY = 5000
ZIPF_S = 1.07
TOPIC_WORDS = 12
TOPIC_SHARE = 0.30
NOW_US = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
AS_OF_US = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
OPEN_END = 2**62  # peers store an open validity as this far-future number
DAY_US = 86_400 * 1_000_000
SPAN_US = 730 * DAY_US


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def pseudo_words(rng: np.random.Generator, count: int) -> list[str]:
    """Pronounceable made-up words (no real-language stemming or stop words apply)."""
    consonants = list("bcdfghklmnprstvz")
    vowels = list("aeiou")
    words: dict[str, None] = {}
    while len(words) < count:
        syllables = int(rng.integers(2, 4))
        word = "".join(
            str(rng.choice(consonants)) + str(rng.choice(vowels)) for _ in range(syllables)
        )
        if rng.random() < 0.5:
            word += str(rng.choice(consonants))
        words[word] = None
    return list(words)


def rfc3339(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Queries:
    vectors: np.ndarray  # (n, 384) float32
    rooms: list[str]
    texts: list[str]
    terms: list[list[int]]  # vocabulary indices of each text's words


@dataclass
class SpeedData:
    size: int
    seed: int
    vectors: np.ndarray  # (size, 384) float32, unit rows
    texts: list[str]
    terms: list[np.ndarray]  # vocabulary indices per record
    words: list[str]
    rooms: np.ndarray  # int room index per record
    valid_from: np.ndarray  # µs
    valid_to: np.ndarray  # µs, OPEN_END when open
    supersedes: np.ndarray  # index of the record this one supersedes, -1 when none
    invalidated: np.ndarray  # bool: closed by an invalidation (not a supersession)
    queries: Queries
    stats: dict[str, float] = field(default_factory=dict)

    def record_id(self, index: int) -> str:
        return f"r{index:07d}"

    @staticmethod
    def index_of(record_id: str) -> int:
        return int(record_id[1:])

    def room_name(self, room: int) -> str:
        return f"room-{room}"

    def valid_at(self, at_us: int) -> np.ndarray:
        """The rows erstwhile's point rule keeps at ``at_us``: valid_from <= t < valid_to."""
        return (self.valid_from <= at_us) & (self.valid_to > at_us)


def generate(size: int, queries: int, seed: int = 7) -> SpeedData:
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((CENTRES, DIMENSIONS), dtype=np.float32))
    cluster = rng.integers(0, CENTRES, size)
    noise = rng.standard_normal((size, DIMENSIONS), dtype=np.float32) * 0.05
    vectors = unit(centres[cluster] + noise)

    words = pseudo_words(rng, VOCABULARY)
    ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
    zipf = ranks**-ZIPF_S
    zipf /= zipf.sum()
    # topic words come from the mid and long tail: ranks 200 and on
    topics = rng.integers(200, VOCABULARY, (CENTRES, TOPIC_WORDS))
    lengths = rng.integers(6, 15, size)
    total = int(lengths.sum())
    background = rng.choice(VOCABULARY, total, p=zipf)
    topical = rng.random(total) < TOPIC_SHARE
    owner = np.repeat(np.arange(size), lengths)
    topic_pick = topics[cluster[owner], rng.integers(0, TOPIC_WORDS, total)]
    flat = np.where(topical, topic_pick, background)
    terms = np.split(flat, np.cumsum(lengths)[:-1])
    texts = [" ".join(words[t] for t in row) for row in terms]

    rooms = rng.integers(0, ROOMS, size)
    start = NOW_US - SPAN_US
    offsets = np.sort(rng.integers(0, SPAN_US - 2 * DAY_US, size))
    valid_from = start + offsets + np.arange(size)  # strictly increasing
    valid_to = np.full(size, OPEN_END, dtype=np.int64)
    supersedes = np.full(size, -1, dtype=np.int64)
    superseded = np.zeros(size, dtype=bool)
    for j in rng.permutation(np.arange(1, size))[: size // 10]:
        i = int(j - rng.integers(1, min(j, 2000) + 1))
        if superseded[i] or supersedes[j] >= 0:
            continue
        superseded[i] = True
        supersedes[j] = i
        valid_to[i] = valid_from[j]
    invalidated = np.zeros(size, dtype=bool)
    candidates = np.flatnonzero(~superseded)
    for i in rng.permutation(candidates)[: size // 10]:
        room = NOW_US - DAY_US - valid_from[i]
        if room <= DAY_US:
            continue
        valid_to[i] = valid_from[i] + int(rng.integers(DAY_US, room))
        invalidated[i] = True

    qc = rng.integers(0, CENTRES, queries)
    q_vectors = unit(
        centres[qc] + rng.standard_normal((queries, DIMENSIONS), dtype=np.float32) * 0.03
    )
    q_rooms = [f"room-{r}" for r in rng.integers(0, ROOMS, queries)]
    tail = zipf[20:] / zipf[20:].sum()
    q_terms: list[list[int]] = []
    for q in range(queries):
        picked = [int(t) for t in rng.choice(topics[qc[q]], 2, replace=False)]
        if rng.random() < 0.5:
            picked.append(int(20 + rng.choice(VOCABULARY - 20, p=tail)))
        q_terms.append(list(dict.fromkeys(picked)))
    q_texts = [" ".join(words[t] for t in row) for row in q_terms]
    data = SpeedData(
        size=size, seed=seed, vectors=vectors, texts=texts, terms=terms, words=words,
        rooms=rooms, valid_from=valid_from, valid_to=valid_to, supersedes=supersedes,
        invalidated=invalidated, queries=Queries(q_vectors, q_rooms, q_texts, q_terms),
    )  # fmt: skip
    current = data.valid_at(NOW_US)
    data.stats = {
        "superseded_fraction": round(float(superseded.mean()), 4),
        "invalidated_fraction": round(float(invalidated.mean()), 4),
        "current_fraction": round(float(current.mean()), 4),
        "room_and_current_fraction": round(float((current & (rooms == 0)).mean()), 4),
        "valid_at_as_of_fraction": round(float(data.valid_at(AS_OF_US).mean()), 4),
        "mean_words": round(float(lengths.mean()), 2),
    }
    return data

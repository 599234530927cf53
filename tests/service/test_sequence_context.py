"""A record that names its conversation or session is embedded with the record before
it in that sequence, whichever way it is written: turn by turn, in one batch, through
the importer, or later by the embed job (a backlog, a reindex). Real stores, both
backends; the hash embedder, so the oracle computes the same vectors by hand."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import erstwhile
from erstwhile.embedding import HashEmbedder
from erstwhile.jobs.importing import conversation_records, import_conversation

EMBEDDER = HashEmbedder()
START = datetime(2024, 1, 1, tzinfo=UTC)
FIELDS = {"id", "content", "kind", "metadata", "valid_from"}
WORDS = ["lake", "dog", "paint", "run", "book", "sister", "trip", "cake", "Ann", "Bob"]


def vectors(memory: erstwhile.Memory, namespace: str, ids: list[str]) -> dict[str, np.ndarray]:
    embedder_id = memory.embedder_id(namespace)
    found = memory.service.store.vectors_for(namespace, ids, embedder_id)
    return {i: np.asarray(v, dtype=np.float32) for i, v in found.items()}


def own(text: str) -> np.ndarray:
    return EMBEDDER.embed_documents([text])[0]


def oracle(content: str, before: str | None) -> np.ndarray:
    """The rule, by hand: the mean of the content's embedding and the embedding of the
    record before it, a newline and the content; at unit length."""
    if before is None:
        return own(content)
    mixed = own(content) + own(f"{before}\n{content}")
    return mixed / np.linalg.norm(mixed)


def expected(records: list[Any]) -> dict[str, np.ndarray]:
    """Brute force: for each record, the last earlier one of the same (conversation,
    session) with valid_from no later than its own, in the order they were written."""
    out = {}
    for n, record in enumerate(records):
        key = (record.metadata.get("conversation"), record.metadata.get("session"))
        before = None
        for earlier in records[:n]:
            same = (earlier.metadata.get("conversation"), earlier.metadata.get("session"))
            later = before is None or earlier.valid_from >= before.valid_from
            if same == key and earlier.valid_from <= record.valid_from and later:
                before = earlier
        out[record.id] = oracle(record.content, before.content if before else None)
    return out


def expected_from_store(records: list[Any]) -> dict[str, np.ndarray]:
    """What a re-embedding gives, every record stored: for each record, the last of its
    sequence before it by (valid_from, write order) among all of them."""
    out = {}
    for n, record in enumerate(records):
        key = (record.metadata.get("conversation"), record.metadata.get("session"))
        place = (record.valid_from, n)
        earlier = [
            ((other.valid_from, m), other)
            for m, other in enumerate(records)
            if (other.metadata.get("conversation"), other.metadata.get("session")) == key
            and (other.valid_from, m) < place
        ]
        before = max(earlier, key=lambda item: item[0])[1] if earlier else None
        out[record.id] = oracle(record.content, before.content if before else None)
    return out


def assert_vectors(found: dict[str, np.ndarray], wanted: dict[str, np.ndarray]) -> None:
    assert set(found) == set(wanted)
    for record_id, vector in wanted.items():
        np.testing.assert_allclose(found[record_id], vector, atol=1e-5, err_msg=record_id)


def add_turn(memory: erstwhile.Memory, namespace: str, record: Any) -> None:
    memory.add(namespace, record.content, id=record.id, kind=record.kind,
               metadata=record.metadata, valid_from=record.valid_from)  # fmt: skip


transcripts = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["s1", "s2", "s3"]),
            "day": st.integers(0, 3),
            "turns": st.lists(
                st.tuples(st.sampled_from(["Ann", "Bob"]), st.lists(st.sampled_from(WORDS),
                          min_size=1, max_size=4)),
                min_size=1, max_size=4,
            ),
        }
    ),
    min_size=1,
    max_size=4,
)  # fmt: skip


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(transcript=transcripts)
def test_turn_by_turn_batch_import_and_backlog_give_the_same_vectors(
    memory: erstwhile.Memory, transcript: list[dict[str, Any]]
) -> None:
    """Sessions may repeat (a session resumed later) and their days need not increase:
    every write path gives each turn the vector the brute-force oracle gives it from the
    turns written before it; a reindex, from all the turns stored."""
    sessions = [
        {"id": s["id"], "timestamp": START + timedelta(days=s["day"]),
         "turns": [{"speaker": who, "text": " ".join(words)} for who, words in s["turns"]]}
        for s in transcript
    ]  # fmt: skip
    tag = uuid.uuid4().hex[:12]
    records = [r for _, r in conversation_records(sessions, conversation="c")]
    for n, record in enumerate(records):  # ids in write order, as the records are said
        records[n] = record.model_copy(update={"id": f"t{n}"})
    wanted = expected(records)
    ids = list(wanted)

    one_by_one = f"turns-{tag}"
    for record in records:
        add_turn(memory, one_by_one, record)
    assert_vectors(vectors(memory, one_by_one, ids), wanted)

    batch = f"batch-{tag}"
    memory.upsert(batch, [r.model_dump(include=FIELDS) for r in records])
    assert_vectors(vectors(memory, batch, ids), wanted)

    # the vectors dropped, then refilled by the embed job from what is stored: a session
    # resumed with an earlier time now comes before the turns written ahead of it
    memory.reindex(one_by_one)
    assert_vectors(vectors(memory, one_by_one, ids), expected_from_store(records))

    imported = f"import-{tag}"
    report = import_conversation(memory, imported, sessions, conversation="c")
    by_position = dict(zip(report.ids, ids, strict=True))
    found = vectors(memory, imported, report.ids)
    assert_vectors({by_position[i]: v for i, v in found.items()}, wanted)


def test_what_names_a_sequence(memory: erstwhile.Memory) -> None:
    """``session`` or ``conversation`` in metadata; a record naming neither, or another
    sequence, is embedded alone; a missing key matches only a missing key."""
    ns = "names"
    memory.add(ns, "Ann: hello", id="a", metadata={"session": "1"})
    memory.add(ns, "Bob: hi there", id="b", metadata={"session": "1"})
    memory.add(ns, "a note", id="n")
    memory.add(ns, "Ann: other talk", id="x", metadata={"session": "1", "conversation": "x"})
    memory.add(ns, "Bob: yes", id="y", metadata={"conversation": "x", "session": "1"})
    memory.add(ns, "Ann: only a conversation", id="c1", metadata={"conversation": "x"})
    memory.add(ns, "Bob: still it", id="c2", metadata={"conversation": "x"})
    assert_vectors(
        vectors(memory, ns, ["a", "b", "n", "x", "y", "c1", "c2"]),
        {
            "a": oracle("Ann: hello", None),
            "b": oracle("Bob: hi there", "Ann: hello"),
            "n": oracle("a note", None),
            "x": oracle("Ann: other talk", None),  # conversation x is not the bare session 1
            "y": oracle("Bob: yes", "Ann: other talk"),
            "c1": oracle("Ann: only a conversation", None),
            "c2": oracle("Bob: still it", "Ann: only a conversation"),
        },
    )


def test_the_record_before_is_the_live_one_by_valid_from_then_first_write(
    memory: erstwhile.Memory,
) -> None:
    ns = "order"
    session = {"session": "1"}
    memory.add(ns, "one", id="1", metadata=session, valid_from="2024-01-01")
    memory.add(ns, "two", id="2", metadata=session, valid_from="2024-01-01")
    memory.add(ns, "three", id="3", metadata=session, valid_from="2024-01-01")
    # a late write said earlier: its context is what stood before it by valid_from
    memory.add(ns, "zero", id="0", metadata=session, valid_from="2023-12-31")
    # a revision keeps its place: "two" is still after "one", not after "three"
    memory.add(ns, "two, corrected", id="2", metadata=session, valid_from="2024-01-01")
    memory.delete(ns, "3")
    memory.add(ns, "four", id="4", metadata=session, valid_from="2024-01-02")
    # a correction (supersedes, metadata inherited) is never embedded with what it
    # corrects, and what it corrects is no one's context after it
    memory.upsert(ns, {"id": "5", "content": "five", "metadata": session,
                       "valid_from": "2024-01-03"})  # fmt: skip
    memory.supersede(ns, "5", {"id": "5b", "content": "five again", "valid_from": "2024-01-04"})
    memory.add(ns, "six", id="6", metadata=session, valid_from="2024-01-05")
    assert_vectors(
        vectors(memory, ns, ["0", "2", "4", "5b", "6"]),
        {
            "0": oracle("zero", None),
            "2": oracle("two, corrected", "one"),
            "4": oracle("four", "two, corrected"),  # "three" was deleted
            "5b": oracle("five again", "four"),
            "6": oracle("six", "five again"),
        },
    )


def test_a_vector_given_is_kept_and_still_context_for_the_next(
    memory: erstwhile.Memory,
) -> None:
    ns = "given"
    given_vector = own("something else entirely").tolist()
    memory.upsert(ns, [
        {"id": "a", "content": "Ann: hello", "metadata": {"session": "1"},
         "vector": given_vector},
        {"id": "b", "content": "Bob: hi", "metadata": {"session": "1"}},
    ])  # fmt: skip
    assert_vectors(
        vectors(memory, ns, ["a", "b"]),
        {"a": np.asarray(given_vector, dtype=np.float32), "b": oracle("Bob: hi", "Ann: hello")},
    )

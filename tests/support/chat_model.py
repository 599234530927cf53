"""A fake model behind the fake HTTP server (tests/embedding/fake_server.py): it speaks
OpenAI-compatible ``/chat/completions`` and answers each record's text the way a test
scripts it, by a word in the text (see :class:`Model`)."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.embedding.fake_server import Received, Reply

#: "Ada works on Apollo": the one sentence shape the fake model understands.
FACT = re.compile(r"(\w+) works on (\w+)")
SYSTEM_TOKENS = 40  # what the fake model says the prompt costs besides the text


def answer_for(text: str) -> dict[str, Any]:
    """What a careful model answers for ``text``: the people and projects of each
    "X works on Y" it holds."""
    entities: dict[str, str] = {}
    facts = []
    for person, project in FACT.findall(text):
        entities.setdefault(person, "person")
        entities.setdefault(project, "project")
        facts.append({"subject": person, "predicate": "works_on", "object": project,
                      "confidence": 0.9})  # fmt: skip
    return {"entities": [{"name": n, "kind": k} for n, k in entities.items()], "facts": facts}


def tokens_for(text: str) -> tuple[int, int]:
    return SYSTEM_TOKENS + len(text.split()), 7 + 3 * len(FACT.findall(text))


def chat(content: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "tiny-llm",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
    }  # fmt: skip
    if usage is not None:
        reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                          "total_tokens": sum(usage)}  # fmt: skip
    return reply


class Model:
    """Scripts the fake server from the record's text: a word in it picks the answer.

    ``INVALID`` chats instead of answering JSON, ``PARTIAL`` answers JSON cut short,
    ``NOUSAGE`` answers without a usage object, ``FLAKY`` answers 503 to its first
    attempt, ``SLOW`` answers only once ``release`` is set (past the client's timeout),
    ``REJECT`` answers 400. Anything else: the JSON asked for, with usage."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: Received, number: int) -> Reply:
        text = request.body["messages"][1]["content"]
        with self.lock:
            self.seen[text] = attempt = self.seen.get(text, 0) + 1
        usage = tokens_for(text)
        if "SLOW" in text:
            self.release.wait(30)
        if "REJECT" in text:
            return 400, {}, {"error": {"message": "model not found"}}
        if "FLAKY" in text and attempt == 1:
            return 503, {}, {"error": {"message": "overloaded"}}
        if "INVALID" in text:
            return 200, {}, chat("Sure! Ada works on Apollo, as you asked.", usage)
        if "PARTIAL" in text:
            return 200, {}, chat(json.dumps(answer_for(text))[:25], usage)
        if "NOUSAGE" in text:
            return 200, {}, chat(json.dumps(answer_for(text)), None)
        return 200, {}, chat(json.dumps(answer_for(text)), usage)

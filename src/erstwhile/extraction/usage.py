"""What an extract job spends on its provider (:class:`Usage`) and how much it may
spend (:class:`Budget`).

A *call* is one record shown to the provider: its retries (a transport error, HTTP 408,
429 or 5xx tried again) are counted apart, as ``retries``. A call ends one of three
ways: an answer read into the graph, an answer read as nothing found (``unreadable``:
not the JSON asked for, or past a bound), or a failure (``failed``: the provider gave
up, which fails the job). Tokens are the sums of the OpenAI ``usage`` object's
``prompt_tokens`` and ``completion_tokens`` over the answers that carried one; ``None``
(unknown, not 0) while none did. ``provider_us`` is the wall time spent inside the
provider, retries and their back-off included.

A budget is checked before each record: the job stops before the record that would
make a call past ``max_calls``, and before any record once the tokens spent reach
``max_tokens`` (a call's tokens are known only after it, so the last call may pass it).
A provider that reports no tokens cannot be held to ``max_tokens``: the job stops
after its first call, saying so, rather than spend without a limit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

#: The bounds of a budget: beyond them a number is a typo, not a budget.
MAX_CALLS = 1_000_000_000
MAX_TOKENS = 1_000_000_000_000


def _not_bool(value: object) -> object:
    if isinstance(value, bool):  # an int to Python, never a number of calls
        raise ValueError("must be a whole number, not true or false")
    return value


#: A limit: a whole number (``"5"`` from an environment variable too), never a bool.
CallLimit = Annotated[int, BeforeValidator(_not_bool), Field(ge=1, le=MAX_CALLS)]
TokenLimit = Annotated[int, BeforeValidator(_not_bool), Field(ge=1, le=MAX_TOKENS)]


class Budget(BaseModel):
    """An extract job's limits; ``None``: no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_calls: CallLimit | None = Field(
        default=None, description="The most provider calls (records shown to it) per job."
    )
    max_tokens: TokenLimit | None = Field(
        default=None, description="Stop once the tokens the provider reports reach this."
    )

    def over(self, usage: Usage) -> str | None:
        """Why the next call may not be made (the note the job row keeps), or None."""
        if self.max_calls is not None and usage.calls >= self.max_calls:
            return f"max_calls {self.max_calls} reached ({usage.calls} calls)"
        spent = usage.tokens
        if self.max_tokens is None or usage.calls == 0:
            return None
        if spent is None:
            return (
                f"max_tokens {self.max_tokens} cannot be kept: the provider reported no "
                "token usage (set max_calls instead)"
            )
        if spent >= self.max_tokens:
            return f"max_tokens {self.max_tokens} reached ({spent} tokens)"
        return None

    def or_else(self, default: Budget) -> Budget:
        """This budget, each limit it leaves unset taken from ``default``."""
        return Budget(
            max_calls=default.max_calls if self.max_calls is None else self.max_calls,
            max_tokens=default.max_tokens if self.max_tokens is None else self.max_tokens,
        )


@dataclass
class Usage:
    """One job's provider figures, added to as it runs (one job, one thread)."""

    calls: int = 0
    retries: int = 0
    failed: int = 0
    unreadable: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    provider_us: int = 0

    @property
    def tokens(self) -> int | None:
        """Tokens in and out, or None while no answer reported them."""
        if self.tokens_in is None and self.tokens_out is None:
            return None
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    def add_tokens(self, tokens_in: int, tokens_out: int) -> None:
        self.tokens_in = (self.tokens_in or 0) + tokens_in
        self.tokens_out = (self.tokens_out or 0) + tokens_out

    def to_json(self) -> dict[str, Any]:
        """As a job row keeps it and every interface shows it: ``provider_us`` as
        ``provider_ms`` (a float, microsecond precision)."""
        data = asdict(self)
        data["provider_ms"] = round(data.pop("provider_us") / 1000, 3)
        return data


def read_usage(reply: object) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` of an OpenAI-style reply's ``usage``, or
    None when it has none (or one that is not two non-negative integers)."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if all(type(n) is int and 0 <= n <= MAX_TOKENS for n in counts):
        return counts[0], counts[1]  # type: ignore[return-value]
    return None

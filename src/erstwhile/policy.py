"""The policy a service applies to every call (SPEC §11): caps that keep one caller from
taking a shared server down, and the trust view reads see unless they widen it.

    [policy]                       max_top_k = 1000 ... ; default_view = "unverified"
    [namespaces.NAME]              default_view = "verified"

A request over a cap is refused with :class:`PolicyLimit`, never truncated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from erstwhile.domain.errors import InvalidInput, PolicyLimit
from erstwhile.domain.records import Record, Trust
from erstwhile.domain.search import ExpireRequest, SearchRequest


@dataclass(frozen=True)
class Policy:
    """Caps that keep one caller from taking a shared server down (SPEC §11), and the
    default trust view.

    ``None`` is no cap (the embedded default: the caller owns the process). A request
    over a cap is refused with :class:`PolicyLimit`, never silently truncated.

    ``default_view`` is the least trust a read sees when it names none: ``unverified``
    (the default) sees every record, ``verified`` only records an admin verified.
    ``views`` sets it per namespace. A search widens or narrows it with ``min_trust``,
    a get or history with its ``min_trust`` argument."""

    max_top_k: int | None = None
    max_candidate_k: int | None = None
    max_records_per_upsert: int | None = None
    max_content_bytes: int | None = None
    max_max_rows: int | None = None
    default_view: Trust = "unverified"
    views: Mapping[str, Trust] = field(default_factory=dict)

    def view(self, namespace: str, asked: Trust | None = None) -> Trust:
        """The least trust a read of ``namespace`` sees: what it ``asked`` for, else the
        namespace's view, else the default."""
        if asked is not None:
            return asked
        return self.views.get(namespace, self.default_view)

    def viewed(self, namespace: str, request: SearchRequest) -> SearchRequest:
        """``request`` with the namespace's view when it names no ``min_trust``."""
        if request.min_trust is not None:
            return request
        return request.model_copy(update={"min_trust": self.view(namespace)})

    def check_upsert(self, records: Sequence[Record], *, count: bool = True) -> None:
        if count:
            check_cap(
                len(records),
                self.max_records_per_upsert,
                "records",
                "max_records_per_upsert",
                "send them in smaller batches",
            )
        if self.max_content_bytes is not None:
            for index, record in enumerate(records):
                check_cap(
                    len(record.content.encode("utf-8")),
                    self.max_content_bytes,
                    f"records[{index}].content (bytes)",
                    "max_content_bytes",
                    "split the content into several records",
                )

    def check_search(self, request: SearchRequest) -> None:
        check_cap(request.top_k, self.max_top_k, "top_k", "max_top_k", "ask for fewer hits")
        if request.candidate_k is not None:
            check_cap(
                request.candidate_k,
                self.max_candidate_k,
                "candidate_k",
                "max_candidate_k",
                "ask for a shallower lane depth",
            )

    def check_expire(self, request: ExpireRequest) -> None:
        check_cap(
            request.max_rows,
            self.max_max_rows,
            "max_rows",
            "max_max_rows",
            "expire in several smaller calls",
        )

    def lane_depth(self, request: SearchRequest) -> int:
        """The hybrid lane depth: the caller's (checked), or the default kept under the cap."""
        depth = request.lane_depth()
        if request.candidate_k is None and self.max_candidate_k is not None:
            depth = max(min(depth, self.max_candidate_k), request.top_k)
        return depth


def check_cap(value: int, cap: int | None, name: str, setting: str, fix: str) -> None:
    if cap is not None and value > cap:
        raise PolicyLimit(
            f"{name} is {value}, over the configured limit of {cap} (policy.{setting}); {fix}"
        )


def admits(view: Trust, record: Record) -> bool:
    """Whether a read with trust view ``view`` sees ``record``."""
    return view == "unverified" or record.trust == "verified"


TRUST_LEVELS = ("unverified", "verified")


def check_trust(value: object, name: str) -> Trust | None:
    """``value`` as a trust view (None stays None: the default view), or
    :class:`InvalidInput` naming ``name``."""
    if value is None:
        return None
    if value not in TRUST_LEVELS:
        raise InvalidInput(
            f"{name} must be 'verified' (only records an admin verified) or 'unverified' "
            f"(every record), got {value!r}"
        )
    return cast(Trust, value)

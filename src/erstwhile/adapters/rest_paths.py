"""Record ids in URL paths: SPEC §2 allows any printable id, ``/`` and ``%`` included.

A client sends such an id percent-encoded as one path segment (``a%2Fb``). ASGI
servers decode the path before routing, which would turn that segment into two.
``EncodedSlashes`` routes on a path decoded from the raw bytes except for ``%2F`` and
``%25``, which stay escaped; :func:`decode_segment` undoes those two in the id
parameter. A path with neither escape is left exactly as the server decoded it.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

_KEPT = re.compile(r"%(2F|25)", re.IGNORECASE)


class EncodedSlashes:
    """ASGI middleware: keep ``%2F`` and ``%25`` escaped while routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and _KEPT.search(raw.decode("latin-1")):
            pieces = _KEPT.split(raw.decode("latin-1"))
            # split keeps the captured "2F"/"25" at odd positions; decode the rest
            path = "".join(
                f"%{piece.upper()}" if i % 2 else unquote(piece) for i, piece in enumerate(pieces)
            )
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)


def decode_segment(value: str) -> str:
    """The id as sent: ``%2F`` and ``%25`` (left escaped for routing) decoded."""
    return _KEPT.sub(lambda m: "/" if m.group(1).upper() == "2F" else "%", value)

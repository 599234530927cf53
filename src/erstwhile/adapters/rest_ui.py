"""The web inspector (SPEC §10): static ES modules, HTML and CSS under ``/ui``.

The pages hold no data: they call the ``/v1`` API from the browser with the token the
person typed in, kept in ``sessionStorage`` and sent as ``Authorization: Bearer``, so
every read goes through the same tokens and the one JSON conversion as any client.
The files themselves are public (they contain nothing a token protects).

Every ``/ui`` response carries a strict Content-Security-Policy: scripts and styles
only from the server's own files (no inline script, no ``eval``), requests only to
the server itself, no framing, no form posts, no referrer; the pages build the DOM
with ``textContent`` and never parse data as HTML.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UI_PATH = "/ui"
UI_FILES = Path(__file__).with_name("ui")

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
UI_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


class UiHeaders:
    """ASGI middleware: the security headers on every response under ``/ui``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == UI_PATH or path.startswith(UI_PATH + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in UI_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def mount_ui(app: FastAPI) -> None:
    """Serves the inspector at ``/ui/`` (``/ui`` redirects there)."""

    async def to_index(_request: object) -> RedirectResponse:
        return RedirectResponse(UI_PATH + "/", status_code=308)

    app.router.routes.append(Route(UI_PATH, to_index, methods=["GET", "HEAD"]))
    app.mount(UI_PATH, StaticFiles(directory=UI_FILES, html=True), name="ui")
    app.add_middleware(UiHeaders)

"""``erstwhile serve`` runs uvicorn on its C HTTP parser and the libuv loop, which are
dependencies for that reason (without them a search request cost the server 1.1-1.3 ms
more CPU): uvicorn picks them only when they import, so their absence would be silent."""

from __future__ import annotations

import asyncio
import sys

import pytest
from uvicorn.loops.auto import auto_loop_factory
from uvicorn.protocols.http.auto import AutoHTTPProtocol


def test_uvicorn_parses_http_with_httptools() -> None:
    assert AutoHTTPProtocol.__name__ == "HttpToolsProtocol"


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not run on Windows")
def test_uvicorn_runs_the_uvloop_event_loop() -> None:
    loop = auto_loop_factory()()
    try:
        assert type(loop).__module__.startswith("uvloop")
        assert not isinstance(loop, asyncio.SelectorEventLoop)
    finally:
        loop.close()

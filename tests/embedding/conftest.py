from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_server import FakeServer, running


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A real HTTP server on 127.0.0.1 (port chosen by the OS); set ``respond`` to script it."""
    with running() as fake:
        yield fake

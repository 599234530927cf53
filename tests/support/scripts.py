"""The installed ``erstwhile`` console script, for tests that run it as a user would."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def erstwhile_script() -> str:
    """The script beside this Python (its venv), else the one on PATH."""
    beside_python = Path(sys.executable).with_name("erstwhile")
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("erstwhile")
    if found is None:
        pytest.fail("the erstwhile console script is not installed (pip install -e .)")
    return found

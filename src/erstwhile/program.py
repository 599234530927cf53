"""Running an operator's program as a provider: JSON on stdin, JSON on stdout.

Shared by the ``command`` embedder and the ``command`` extractor. The program runs
with a copy of erstwhile's environment minus every ``ERSTWHILE_*`` variable
(erstwhile's own configuration and tokens) and minus every variable that holds a
configured secret, whether found by name or by value. No shell is involved: the
command is an argv list. Every failure is ``ProviderFailed`` with a message that
never carries a secret.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

from erstwhile.domain.errors import InvalidInput, ProviderFailed
from erstwhile.embedding.base import redact

_STDERR_TAIL = 500
_OWN_PREFIX = "ERSTWHILE_"


def check_argv(argv: object, setting: str) -> list[str]:
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(arg, str) and arg for arg in argv)
    ):
        raise InvalidInput(
            f"{setting} must be a non-empty list of program and arguments, "
            'e.g. ["/usr/local/bin/tool", "--fast"]'
        )
    return list(argv)


def child_env(environ: Mapping[str, str], secret_env: Iterable[str]) -> dict[str, str]:
    """The environment the program gets: ``environ`` minus ours and minus secrets."""
    hidden_names = frozenset(secret_env)
    hidden_values = {environ[name] for name in hidden_names if environ.get(name)}
    return {
        name: value
        for name, value in environ.items()
        # Case-insensitive: erstwhile's settings read ERSTWHILE_* without regard to case.
        if not name.upper().startswith(_OWN_PREFIX)
        and name not in hidden_names
        and value not in hidden_values
    }


def run_json(
    argv: list[str],
    request: dict[str, Any],
    *,
    secret_env: Iterable[str],
    timeout: float,
    describe: str,
    timeout_setting: str,
) -> bytes:
    """Runs ``argv`` with ``request`` as JSON on stdin; returns its stdout. ``describe``
    starts every failure message (who failed)."""
    names = list(secret_env)
    secrets = [os.environ[name] for name in names if os.environ.get(name)]

    def failure(detail: str) -> ProviderFailed:
        return ProviderFailed(f"{describe}: command {argv[0]!r} failed: {detail}")

    try:
        done = subprocess.run(
            argv,
            input=json.dumps(request).encode("utf-8"),
            capture_output=True,
            env=child_env(os.environ, names),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise failure(f"{argv[0]!r} was not found") from None
    except PermissionError:
        raise failure(f"{argv[0]!r} is not executable") from None
    except OSError as exc:
        raise failure(f"could not start: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise failure(f"no answer within {timeout:g} s ({timeout_setting})") from None
    if done.returncode != 0:
        tail = redact(_tail(done.stderr), secrets)
        raise failure(f"exit status {done.returncode}" + (f"; stderr: {tail}" if tail else ""))
    return done.stdout


def _tail(stderr: bytes) -> str:
    text = " ".join(stderr.decode("utf-8", errors="replace").split())
    return text if len(text) <= _STDERR_TAIL else "…" + text[-_STDERR_TAIL:]

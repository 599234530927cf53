"""schemathesis against the served OpenAPI document of a real ``erstwhile serve``.

For every operation, schema-valid requests (a bounded, deterministic number per
operation) must never get a 5xx, and every response must match the document: a
documented status, the documented content type and a body valid against the schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .harness import Server, start_server, write_config

MAX_EXAMPLES = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("fuzz")
    server = start_server(root / "fuzz.db", write_config(root / "erstwhile.toml"))
    _, secret = server.token(admin=True, name="fuzz")
    with server.http(secret) as client:  # something to find, so reads are not all 404
        client.post(
            "/v1/namespaces/default/records",  # the ids the schema's examples name
            json={"records": [{"id": "example-1", "content": "seed", "metadata": {"k": "v"}}]},
        )
    yield server, secret
    server.stop()


@pytest.fixture(scope="module")
def api(fuzzed: tuple[Server, str]) -> Any:
    server, _ = fuzzed
    config = schemathesis.Config.from_dict(
        {
            "generation": {
                "mode": "positive",
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
            }
        }
    )
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)


def test_api_conforms_to_its_schema(api: Any, fuzzed: tuple[Server, str]) -> None:
    # Each operation's strategy is driven by hypothesis directly, rather than through
    # schemathesis' pytest plugin, whose lazy parametrisation breaks with every pytest
    # major release; the checks and the bounded, deterministic examples are the same.
    server, secret = fuzzed
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 10, "the served document lists the REST operations"
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def conforms(case: Any) -> None:
            case.call_and_validate(
                base_url=server.url,
                headers={"Authorization": f"Bearer {secret}"},
                checks=CHECKS,
            )

        conforms()

"""Fuzz every operation of the API from its own OpenAPI document with schemathesis: whatever
it sends — valid, boundary or malformed — the server never answers 5xx, and its answers match
what the document says."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from engram.http.app import create_app
from engram.settings import Config
from engram.store import Store
from tests.support.http import BASE_URL

EXAMPLES_PER_OPERATION = 20


def _document() -> dict:
    """The app's OpenAPI document (it does not depend on what the store holds)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        Store.open(config=Config(data_dir=Path(tmp))) as store,
    ):
        return create_app(store).openapi_schema.to_schema()


schema = schemathesis.openapi.from_dict(_document())


@pytest.fixture
def app(store: Store) -> Iterator:
    store.add_observation(title="Seed", content="something to find", session_id="s-1")
    store.add_prompt("a prompt to find", session_id="s-1")
    yield create_app(store)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors_and_answers_match_the_schema(case, app) -> None:
    case.call_and_validate(
        app=app,
        base_url=BASE_URL,  # a loopback Host, as local programs send
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )

"""The push service is one library call per push route (validation, authorization, pause,
storage and audit), usable without HTTP; the routes declare their query parameters, and the
admin routes are guarded instead of taking an unused admin argument."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud import controls, push, sync_log
from engram_cloud.auth import Principal
from engram_cloud.errors import ApiError
from engram_cloud.principals import get_principal
from engram_cloud.settings import Settings
from tests.cloud import records as rec


def _member(engine: Engine, make_user: Callable[..., str], name: str, project: str) -> Principal:
    make_user(name, projects=[project])
    with engine.connect() as conn:
        found = get_principal(conn, name)
    return Principal(
        kind="human",
        role="member",
        source="managed_token",
        username=name,
        display_name=name,
        id=found["principal_id"],
        grants=frozenset({project}),
    )


def test_the_push_service_authorizes_stores_and_audits_without_http(
    engine: Engine, settings: Settings, make_user: Callable[..., str]
) -> None:
    gamma = _member(engine, make_user, "gina", "gamma")
    refused = rec.push_body([rec.observation(project="alpha")])
    with pytest.raises(ApiError) as caught:
        push.push_mutations(engine, settings, gamma, refused)
    assert caught.value.status_code == 403
    answer = push.push_mutations(
        engine, settings, gamma, rec.push_body([rec.observation(project="gamma")])
    )
    assert len(answer["accepted"]) == 1 and answer["rejected"] == []
    with engine.connect() as conn:
        audit = controls.audit_rows(conn, contributor="gina")
        stored = sync_log.pull(conn, since=0, projects=None, limit=10)
    assert sorted(row["outcome"] for row in audit) == [
        controls.OUTCOME_ACCEPTED,
        controls.OUTCOME_FORBIDDEN,
    ]
    assert [orjson.loads(record)["project"] for _, record in stored.rows] == ["gamma"]


def test_the_api_schema_lists_the_pull_parameters_and_no_admin_argument(
    client: TestClient,
) -> None:
    schema = client.get("/schema/openapi.json").json()
    pull = schema["paths"]["/sync/mutations/pull"]["get"]
    assert {p["name"] for p in pull["parameters"]} >= {
        "since",
        "since_seq",
        "limit",
        "wait",
        "project",
    }
    for path, methods in schema["paths"].items():
        for operation in methods.values():
            names = {p["name"] for p in operation.get("parameters", [])}
            assert "admin" not in names, path

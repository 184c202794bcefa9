"""One object shape everywhere (docs/http.md): the HTTP API answers with the store's own models
(msgspec Structs), so /schema describes exactly what the store returns and the CLI's ``--json``
prints. There is no copy left to drift; this checks it stays so."""

from __future__ import annotations

import msgspec
import pytest
from litestar.testing import TestClient

from engram.http import models as http_models
from engram.store import Store, models

SERVED = [
    models.Observation,
    models.Session,
    models.Prompt,
    models.SearchMatch,
    models.Stats,
    models.ProjectInfo,
    models.MergeResult,
    models.PassiveResult,
    models.ImportResult,
    models.Timeline,
    models.TimelineEntry,
    models.Relation,
    models.RelationEnd,
]


@pytest.mark.parametrize("model", SERVED, ids=lambda m: m.__name__)
def test_the_http_api_answers_with_the_store_models(model: type) -> None:
    assert getattr(http_models, model.__name__) is model
    assert issubclass(model, msgspec.Struct)


@pytest.mark.parametrize("model", [models.Observation, models.Session, models.Timeline])
def test_the_schema_lists_the_store_models_fields(client: TestClient, model: type) -> None:
    schema = client.get("/schema/openapi.json").json()["components"]["schemas"]
    fields = [f.name for f in msgspec.structs.fields(model)]
    assert list(schema[model.__name__]["properties"]) == fields


def test_an_http_answer_is_the_cli_json_of_the_same_memory(
    client: TestClient, store: Store
) -> None:
    saved = client.post("/observations", json={"title": "One shape", "content": "everywhere"})
    memory = saved.json()["observation"]
    assert memory == store.get_observation(memory["id"]).to_dict()
    assert "rank" not in memory and "match" not in memory  # search results only
    found = client.get("/search", params={"q": "everywhere"}).json()[0]
    assert {"rank", "match"} <= set(found)

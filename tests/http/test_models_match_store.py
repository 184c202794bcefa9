"""One object shape everywhere (docs/http.md). The HTTP API's typed bodies mirror the store's models
(so /schema is exact); this keeps the two from drifting apart."""

import dataclasses

import msgspec
import pytest

from engram.http import models as http_models
from engram.store import models


@pytest.mark.parametrize(
    ("struct", "model"),
    [
        (http_models.ObservationOut, models.Observation),
        (http_models.SessionOut, models.Session),
        (http_models.PromptOut, models.Prompt),
        (http_models.StatsOut, models.Stats),
        (http_models.ProjectInfoOut, models.ProjectInfo),
        (http_models.MergeResultOut, models.MergeResult),
        (http_models.PassiveResultOut, models.PassiveResult),
        (http_models.ImportResultOut, models.ImportResult),
        (http_models.TimelineEntryOut, models.TimelineEntry),
    ],
)
def test_http_bodies_have_the_store_models_fields(struct: type, model: type) -> None:
    struct_fields = [f.name for f in msgspec.structs.fields(struct)]
    model_fields = [f.name for f in dataclasses.fields(model)]
    assert struct_fields == model_fields

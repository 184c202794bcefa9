"""JSON export/import: round trip, idempotence, the upstream 0.1.0 format, and bad files."""

import orjson
import pytest

from engram.errors import UnsupportedFormatError, ValidationError
from engram.project import project_name
from engram.record import EPOCH_TEXT, derived_sync_id
from engram.store import Store

GO_EXPORT = {
    "version": "0.1.0",
    "exported_at": "2026-01-02 03:04:05",
    "sessions": [
        {"id": "s-go", "project": "Acme", "directory": "/src", "started_at": "2026-01-01 10:00:00"}
    ],
    "observations": [
        {
            "id": 7,
            "sync_id": "obs-aaaaaaaaaaaaaaaa",
            "session_id": "s-go",
            "type": "bugfix",
            "title": "Go memory",
            "content": "from the go tool",
            "project": "acme",
            "scope": "",
            "revision_count": 0,
            "duplicate_count": 1,
            "created_at": "2026-01-01 10:01:00",
            "updated_at": "2026-01-01 10:02:00",
        },
        {
            "id": 8,
            "sync_id": "",
            "session_id": "s-missing",
            "type": "",
            "title": "No sync id",
            "content": "x",
            "created_at": "2026-01-01 10:03:00",
            "updated_at": "2026-01-01 10:03:00",
            "deleted_at": "2026-01-02 00:00:00",
        },
    ],
    "prompts": None,
}


def test_round_trip_keeps_identity_and_is_idempotent(store: Store, make_store) -> None:
    store.create_session("s1", "acme", "/x")
    a = store.add_observation(title="a", content="a", session_id="s1", project="acme").observation
    b = store.add_observation(title="b", content="b", project="acme").observation
    store.delete_observation(b.id)
    store.add_prompt("why", session_id="s1", project="acme")
    doc = orjson.loads(orjson.dumps(store.export_data()))
    assert doc["version"] == "0.1.0" and len(doc["observations"]) == 2
    other = make_store("other")
    first = other.import_data(doc)
    assert (first.sessions_imported, first.observations_imported, first.prompts_imported) == (
        2,
        2,
        1,
    )
    again = other.import_data(doc)
    assert (again.observations_imported, again.skipped) == (0, 5)
    assert other.get_observation_by_sync_id(a.sync_id).title == "a"
    assert other.get_observation_by_sync_id(b.sync_id).deleted_at is not None
    assert other.stats().total_observations == 1


def test_project_export_includes_referenced_sessions(store: Store) -> None:
    store.add_observation(title="a", content="a", session_id="shared", project="one")
    store.add_observation(title="b", content="b", project="two")
    doc = store.export_data("one")
    assert [o["title"] for o in doc["observations"]] == ["a"]
    assert [s["id"] for s in doc["sessions"]] == ["shared"]


def test_upstream_export_with_nulls_blank_ids_and_missing_sessions(store: Store) -> None:
    result = store.import_data(GO_EXPORT)
    assert (result.sessions_imported, result.observations_imported, result.prompts_imported) == (
        1,
        2,
        0,
    )
    go = store.get_observation_by_sync_id("obs-aaaaaaaaaaaaaaaa")
    assert (go.scope, go.revision_count, go.project) == ("project", 1, "acme")
    minted = [o for o in store.recent_observations(limit=5)]
    assert len(minted) == 1  # the second one was soft-deleted in the export
    assert store.get_session("s-missing").directory == ""
    # Legacy rows get deterministic journal entries: origin zero, hlc from updated_at.
    records = [e.as_record() for e in store.journal.pending("t")]
    assert {r["origin"] for r in records} == {"0" * 16}
    # The row without a sync id gets one derived from its project, session, time, title and
    # content (issue 16): importing the same export again adds nothing, on any machine.
    before = store.canonical_export()
    again = store.import_data(GO_EXPORT)
    assert (again.observations_imported, again.skipped) == (0, 3)
    assert store.canonical_export() == before
    blank = next(o for o in GO_EXPORT["observations"] if not o.get("sync_id"))
    derived = derived_sync_id(
        "observation", project=project_name(blank.get("project")),
        session_id=blank["session_id"], created_at=blank.get("created_at") or EPOCH_TEXT,
        title=blank["title"], content=blank["content"],
    )  # fmt: skip
    assert store.get_observation_by_sync_id(derived).title == blank["title"]


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        ([], UnsupportedFormatError, "JSON object"),
        ({"version": "9.9.9"}, UnsupportedFormatError, "unsupported export version '9.9.9'"),
        ({"version": "0.1.0", "observations": {}}, ValidationError, "observations must be a list"),
        (
            {"version": "0.1.0", "observations": [{"session_id": "s", "content": "c"}]},
            ValidationError,
            r"observations\[0\].title is required",
        ),
        (
            {
                "version": "0.1.0",
                "sessions": [{"id": "ok"}],
                "prompts": [{"session_id": "s", "content": 5}],
            },
            ValidationError,
            r"prompts\[0\].content is required",
        ),
        (
            {
                "version": "0.1.0",
                "observations": [
                    {"session_id": "s", "title": "t", "content": "c", "revision_count": "2"}
                ],
            },
            ValidationError,
            "must be an integer",
        ),
    ],
)
def test_bad_documents_import_nothing(store: Store, doc, error, message) -> None:
    with pytest.raises(error, match=message):
        store.import_data(doc)
    assert store.stats().total_sessions == 0


def test_canonical_export_has_no_local_ids_and_includes_tombstones(store: Store) -> None:
    obs = store.add_observation(title="a", content="a", project="acme").observation
    store.delete_observation(obs.id, hard=True)
    doc = orjson.loads(store.canonical_export())
    assert doc["observations"] == [] and doc["tombstones"][0]["key"] == obs.sync_id
    store.add_observation(title="b", content="b", project="acme")
    doc = orjson.loads(store.canonical_export())
    assert all("id" not in o and o["sync_id"].startswith("obs-") for o in doc["observations"])
    assert all(
        "search_context" not in o and "normalized_hash" not in o for o in doc["observations"]
    )

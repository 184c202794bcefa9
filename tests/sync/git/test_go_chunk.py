"""Chunks in the Go tool's older single-object format are converted by the legacy rule and
applied like any other chunk."""

from __future__ import annotations

import re

import orjson
import pytest

from engram.store import Store
from engram.sync.git.chunk import BadChunkError
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.go_chunk import go_chunk_records
from engram.sync.git.stream import decode_chunk
from engram.sync.git.sync import GitSync
from tests.support.sync_git import export, import_
from tests.sync.git.gofixtures import (
    OBSERVATIONS,
    PROMPTS,
    SESSIONS,
    go_chunk,
    go_mutation,
    write_go_chunk,
)


def test_go_chunk_decodes_with_its_8_hex_id() -> None:
    chunk_id, raw, document = go_chunk(SESSIONS, OBSERVATIONS, PROMPTS)
    assert len(chunk_id) == 8
    decoded = decode_chunk(chunk_id, raw)
    assert decoded.is_go_format and decoded.document == document
    assert decoded.header.counts == {"sessions": 1, "observations": 2, "prompts": 1, "mutations": 0}


def test_rows_become_the_same_legacy_mutations_as_a_json_import(make_store) -> None:
    _, _, document = go_chunk(SESSIONS, OBSERVATIONS, PROMPTS)
    records, skipped = go_chunk_records("abcdef01", document)
    assert skipped == 0
    # Prompts come before memories (each memory is indexed with the prompt that led to it).
    assert [r["entity"] for r in records] == ["session", "prompt", "observation", "observation"]
    assert {r["origin"] for r in records} == {"0" * 16}
    deleted = next(r for r in records if r["key"] == "obs-go000000000002")
    assert deleted["op"] == "delete" and deleted["payload"]["hard"] is False
    assert records[2]["payload"]["project"] == "acme"  # normalized like every import

    # The same rows imported as a 0.1.0 export produce byte-identical journal records, so two
    # machines reaching the same old data by different routes agree on every mid.
    other = make_store("json-import")
    other.import_data({"version": "0.1.0", **document})
    journal = {e.mid: e.as_record() for e in other.journal.pending("none")}
    assert {r["mid"]: r for r in records} == journal


def test_go_chunk_in_a_sync_directory_imports_once(store: Store, sync_dir: SyncDir) -> None:
    chunk_id = write_go_chunk(sync_dir.path, SESSIONS, OBSERVATIONS, PROMPTS)
    manifest = sync_dir.manifest_path
    manifest.write_bytes(
        orjson.dumps(
            {
                "version": 1,
                "chunks": [
                    {
                        "id": chunk_id,
                        "created_by": "gopher",
                        "created_at": "2026-01-02T05:00:00Z",
                        "sessions": 1,
                        "memories": 2,
                        "prompts": 1,
                    }
                ],
            }
        )
    )
    report = import_(store, sync_dir)
    assert report.failures == [] and report.chunks_imported == [chunk_id]
    assert report.applied.applied == 4
    live = store.get_observation_by_sync_id("obs-go000000000001")
    assert live.title == "Token refresh" and live.revision_count == 2
    assert store.get_observation_by_sync_id("obs-go000000000002").deleted_at is not None
    assert store.get_session("go-s1").summary == "Fixed auth & <tokens>"
    assert store.recent_prompts("acme")[0].content == "why does login expire?"
    # status names who wrote it (from the Go manifest) and counts from the content
    raw = manifest.read_bytes()
    status = GitSync(store, sync_dir).status()
    assert status.contributors == {"gopher": 1} and status.memories == 2
    assert status.go_chunks == 1 and status.manifest == "ok"
    again = import_(store, sync_dir)
    assert again.chunks_imported == [] and again.chunks_already == 1
    # legacy mutations that came from the directory are never exported back into it, and the
    # Go tool's manifest is left as it was
    assert export(store, sync_dir, None).nothing_new
    assert manifest.read_bytes() == raw


def test_explicit_mutations_win_and_relations_are_converted() -> None:
    """Relations were skipped and counted before issue 20; now they become records like the
    rest (an incomplete one, as here, is then quarantined by the store, alone)."""
    mutations = [
        go_mutation(
            1,
            "observation",
            "obs-go000000000001",
            "upsert",
            {
                "sync_id": "obs-go000000000001",
                "session_id": "go-s1",
                "type": "bugfix",
                "title": "Token refresh v2",
                "content": "edited",
                "scope": "project",
                "updated_at": "2026-01-03 09:00:00",
            },
            double=True,
        ),
        go_mutation(
            2,
            "prompt",
            "prompt-go0000000001",
            "delete",
            {
                "sync_id": "prompt-go0000000001",
                "deleted": True,
                "deleted_at": "2026-01-03 09:30:00",
                "hard_delete": True,
            },
        ),
        go_mutation(3, "relation", "rel-1", "upsert", {"sync_id": "rel-1"}),
        go_mutation(
            4, "session", "go-s2", "upsert", {"id": "go-s2", "project": "acme", "directory": "/x"}
        ),
    ]
    _, _, document = go_chunk(SESSIONS, OBSERVATIONS, PROMPTS, mutations)
    records, skipped = go_chunk_records("abcdef01", document)
    assert skipped == 0
    by_key = {r["key"]: r for r in records}
    assert by_key["rel-1"]["entity"] == "relation" and by_key["rel-1"]["project"] == "acme"
    edited = by_key["obs-go000000000001"]
    assert edited["payload"]["title"] == "Token refresh v2"
    assert edited["payload"]["created_at"] == "2026-01-02 03:10:00"  # kept from the typed row
    assert edited["hlc"].startswith(str(1767430800000))  # 2026-01-03 09:00:00 UTC
    assert by_key["prompt-go0000000001"]["op"] == "delete"
    assert by_key["prompt-go0000000001"]["payload"] == {
        "sync_id": "prompt-go0000000001",
        "session_id": "go-s1",
        "project": "acme",
        "deleted_at": "2026-01-03 09:30:00",
        "hard": True,
    }
    # order: session upserts, other upserts, relation upserts, other deletes, session deletes
    assert [r["entity"] for r in records][:2] == ["session", "session"]
    where = [r["key"] for r in records].index("rel-1")
    assert all(r["op"] == "upsert" for r in records[:where])
    assert all(r["op"] == "delete" for r in records[where + 1 :])
    assert records[-1]["op"] == "delete"


def test_soft_delete_mutation_keeps_the_full_state() -> None:
    mutations = [
        go_mutation(
            1,
            "observation",
            "obs-go000000000001",
            "delete",
            {
                "sync_id": "obs-go000000000001",
                "deleted": True,
                "deleted_at": "2026-01-04 00:00:00",
                "hard_delete": False,
            },
        )
    ]
    _, _, document = go_chunk(SESSIONS, OBSERVATIONS, PROMPTS, mutations)
    records, _ = go_chunk_records("abcdef01", document)
    record = next(r for r in records if r["key"] == "obs-go000000000001")
    assert record["op"] == "delete"
    assert record["payload"]["title"] == "Token refresh"
    assert record["payload"]["deleted_at"] == "2026-01-04 00:00:00"


def test_rows_without_sync_id_get_the_same_id_everywhere() -> None:
    rows = [{**OBSERVATIONS[0], "sync_id": None}]
    _, _, document = go_chunk(SESSIONS, rows, None)
    first, _ = go_chunk_records("abcdef01", document)
    second, _ = go_chunk_records("abcdef01", document)
    assert first[1]["key"].startswith("obs-") and first == second


@pytest.mark.parametrize(
    "document,message",
    [
        (
            {"sessions": None, "observations": [{"id": 1, "session_id": "s", "content": "c"}]},
            "observations[0].title is required",
        ),
        ({"sessions": "nope"}, "sessions must be a list"),
        (
            {
                "mutations": [
                    {"entity": "widget", "entity_key": "k", "op": "upsert", "payload": "{}"}
                ]
            },
            "unknown entity 'widget'",
        ),
        (
            {
                "mutations": [
                    {"entity": "session", "entity_key": "k", "op": "explode", "payload": "{}"}
                ]
            },
            "unknown op",
        ),
        (
            {
                "mutations": [
                    {"entity": "session", "entity_key": "k", "op": "upsert", "payload": "{not json"}
                ]
            },
            "payload is not JSON",
        ),
        (
            {
                "mutations": [
                    {
                        "entity": "session",
                        "entity_key": "k",
                        "op": "upsert",
                        "payload": '{"id": "other"}',
                    }
                ]
            },
            "does not match",
        ),
    ],
)
def test_bad_go_documents_name_the_problem(document: dict, message: str) -> None:
    with pytest.raises(BadChunkError, match=re.escape(message)):
        go_chunk_records("abcdef01", document)


def test_a_clone_named_rows_meet_the_merged_upgrade_in_one_memory(make_store, tmp_path) -> None:
    """Issue 16: the Go tool names the project after the clone (``work-copy``). Its chunk
    applied in the repository of project ``acme-api`` and the same rows reaching another
    machine as a Go export (or an upgraded Go database) followed by ``engram projects merge
    work-copy acme-api`` end as the same memories under the same keys."""
    sessions = [{**SESSIONS[0], "project": "work-copy"}]
    rows = [{**o, "project": "work-copy", "sync_id": None} for o in OBSERVATIONS]
    prompts = [{**p, "project": "work-copy", "sync_id": None} for p in PROMPTS]
    repo = SyncDir(tmp_path / "acme-api" / ".engram")
    write_go_chunk(repo.path, sessions, rows, prompts)
    chunked = make_store("chunk")
    assert import_(chunked, repo).failures == []

    merged = make_store("merge")
    merged.import_data(
        {"version": "0.1.0", "sessions": sessions, "observations": rows, "prompts": prompts}
    )
    merged.merge_projects(["work-copy"], "acme-api")

    def keys(store: Store) -> set[tuple[str, str, str]]:
        document = orjson.loads(store.canonical_export(projects=["acme-api"]))
        return {
            (kind, item["sync_id"], item["title"] if kind == "observation" else item["content"])
            for kind in ("observation", "prompt")
            for item in document[kind + "s"]
            if item.get("deleted_at") is None and item.get("content")
        }

    found = keys(chunked)
    assert found and found == keys(merged)
    assert not orjson.loads(chunked.canonical_export(projects=["work-copy"]))["observations"]

"""The manifest is an index: rendered deterministically, read leniently, never trusted."""

from __future__ import annotations

import orjson

from engram.sync.git.chunk import ChunkHeader
from engram.sync.git.manifest import ManifestEntry, read_manifest, render_manifest


def entry(chunk_id: str, created_at: str, by: str = "alice") -> ManifestEntry:
    header = ChunkHeader(
        by, created_at, {"sessions": 1, "observations": 2, "prompts": 3, "mutations": 7}
    )
    return ManifestEntry.from_header(chunk_id, header)


def test_render_sorts_by_time_then_id_with_two_space_json() -> None:
    entries = [
        entry("bbbbbbbbbbbbbbbb", "2026-01-02T00:00:00Z"),
        entry("aaaaaaaaaaaaaaaa", "2026-01-02T00:00:00Z"),
        entry("cccccccccccccccc", "2026-01-01T00:00:00Z", "bob"),
    ]
    data = render_manifest(entries)
    assert data == render_manifest(reversed(entries))  # same chunks ⇒ same bytes
    document = orjson.loads(data)
    assert document["version"] == 2
    assert [c["id"] for c in document["chunks"]] == [
        "cccccccccccccccc",
        "aaaaaaaaaaaaaaaa",
        "bbbbbbbbbbbbbbbb",
    ]
    assert document["chunks"][0] == {
        "id": "cccccccccccccccc",
        "created_by": "bob",
        "created_at": "2026-01-01T00:00:00Z",
        "sessions": 1,
        "memories": 2,
        "prompts": 3,
        "mutations": 7,
    }
    assert data.startswith(b'{\n  "version": 2,\n  "chunks": [\n    {\n      "id"')
    assert data.endswith(b"}\n")


def test_missing_and_valid_manifests() -> None:
    assert read_manifest(None).state == "missing"
    reading = read_manifest(render_manifest([entry("aaaaaaaaaaaaaaaa", "t")]))
    assert reading.state == "ok" and list(reading.entries) == ["aaaaaaaaaaaaaaaa"]
    assert reading.problems == []


def test_go_version_1_manifest_is_read() -> None:
    raw = orjson.dumps(
        {
            "version": 1,
            "chunks": [
                {
                    "id": "a3f8c1d2",
                    "created_by": "alice",
                    "created_at": "2026-01-02T03:04:05Z",
                    "sessions": 8,
                    "memories": 10,
                    "prompts": 3,
                }
            ],
        }
    )
    reading = read_manifest(raw)
    assert reading.entries["a3f8c1d2"].memories == 10
    assert reading.entries["a3f8c1d2"].created_by == "alice"


def test_path_traversal_ids_are_dropped_and_reported() -> None:
    raw = orjson.dumps(
        {
            "version": 2,
            "chunks": [
                {"id": "../../../etc/passwd", "created_by": "mallory", "created_at": "t"},
                {"id": "aaaaaaaaaaaaaaaa/../../x", "created_by": "mallory", "created_at": "t"},
                {"id": "aaaaaaaaaaaaaaaa", "created_by": "alice", "created_at": "t"},
            ],
        }
    )
    reading = read_manifest(raw)
    assert list(reading.entries) == ["aaaaaaaaaaaaaaaa"]
    assert len(reading.problems) == 2
    assert "'../../../etc/passwd'" in reading.problems[0]


def test_conflict_markers_are_detected_and_entries_salvaged() -> None:
    ours = render_manifest([entry("aaaaaaaaaaaaaaaa", "1"), entry("bbbbbbbbbbbbbbbb", "2")])
    theirs = render_manifest([entry("aaaaaaaaaaaaaaaa", "1"), entry("cccccccccccccccc", "3")])
    conflicted = (
        ours.split(b'    {\n      "id": "bbbb')[0]
        + b"<<<<<<< HEAD\n"
        + ours.split(b"},\n", 1)[1]
        + b"=======\n"
        + theirs.split(b"},\n", 1)[1]
        + b">>>>>>> theirs\n"
    )
    reading = read_manifest(conflicted)
    assert reading.state == "conflicted"
    assert set(reading.entries) == {"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"}
    assert "conflict markers" in reading.problems[0]


def test_union_merged_garbage_is_invalid_but_salvaged() -> None:
    # Both sides appended an entry at the same place; a line union keeps both, comma missing.
    a = render_manifest([entry("aaaaaaaaaaaaaaaa", "1")]).split(b"\n")
    b = render_manifest([entry("bbbbbbbbbbbbbbbb", "2")]).split(b"\n")
    merged = b"\n".join(a[:-3] + b[3:-3] + a[-3:])
    reading = read_manifest(merged)
    assert reading.state == "invalid"
    assert set(reading.entries) == {"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"}
    broken = read_manifest(b'{"version": 2, "chunks": [ {"id": "aaaaaaaaaaaaaaaa"}, ')
    assert broken.state == "invalid"
    assert list(broken.entries) == ["aaaaaaaaaaaaaaaa"]
    assert read_manifest(b'{"version": 2}').state == "invalid"

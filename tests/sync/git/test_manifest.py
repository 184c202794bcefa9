"""The Go tool's manifest: written byte for byte as the Go tool writes it, read leniently, and
repaired from both sides of a conflict with every entry as it was."""

from __future__ import annotations

import json

import orjson

from engram.sync.git.manifest import (
    ManifestEntry,
    conflict_sides,
    read_manifest,
    render_manifest,
)

#: What engram-go (upstream 1f46479) wrote after two syncs (tests/fixtures/go has more).
GO_WRITTEN = b"""{
  "version": 1,
  "chunks": [
    {
      "id": "1dcd6212",
      "created_by": "gouser",
      "created_at": "2026-11-24T04:07:07Z",
      "sessions": 1,
      "memories": 1,
      "prompts": 0
    },
    {
      "id": "fd4cda2f",
      "created_by": "vm",
      "created_at": "2026-11-24T04:09:08Z",
      "sessions": 1,
      "memories": 2,
      "prompts": 0
    }
  ]
}"""


def entry(chunk_id: str, by: str = "alice", at: str = "2026-01-02T00:00:00Z") -> ManifestEntry:
    return ManifestEntry(chunk_id, by, at, sessions=1, memories=2, prompts=3)


def test_rendering_is_byte_for_byte_the_go_tools() -> None:
    reading = read_manifest(GO_WRITTEN)
    assert reading.state == "ok" and reading.version == 1
    assert render_manifest(reading.entries.values(), reading.version) == GO_WRITTEN
    # Go's HTML-safe escaping and an empty list
    odd = render_manifest([entry("0badcafe", by="a<b>&c\u2028")])
    assert b'"created_by": "a\\u003cb\\u003e\\u0026c\\u2028"' in odd
    assert json.loads(odd)["chunks"][0]["created_by"] == "a<b>&c\u2028"
    assert render_manifest([]) == b'{\n  "version": 1,\n  "chunks": []\n}'


def test_order_is_kept_never_sorted() -> None:
    """The Go tool imports in manifest order (a chunk may name a session only an earlier one
    holds): an entry's place is never changed."""
    entries = [entry("bbbbbbbb", at="2026-01-03T00:00:00Z"), entry("aaaaaaaa", at="")]
    reading = read_manifest(render_manifest(entries))
    assert list(reading.entries) == ["bbbbbbbb", "aaaaaaaa"]


def test_missing_null_and_valid_manifests() -> None:
    assert read_manifest(None).state == "missing" and read_manifest(None).readable
    null = read_manifest(b'{"version": 1, "chunks": null}')
    assert null.state == "ok" and null.entries == {}
    assert read_manifest(b'{"version": 2}').state == "invalid"


def test_entries_of_an_earlier_engram_are_told_apart() -> None:
    raw = orjson.dumps(
        {
            "version": 2,
            "chunks": [
                {"id": "0123456789abcdef", "created_by": "ours", "created_at": "t", "mutations": 4},
                {"id": "a3f8c1d2", "created_by": "unknown", "created_at": ""},
            ],
        }
    )
    reading = read_manifest(raw)
    assert reading.ours == ["0123456789abcdef"] and reading.version == 2
    go = reading.entries["a3f8c1d2"]
    assert (go.created_by, go.created_at) == ("unknown", "")  # kept as found, never invented


def test_path_traversal_ids_are_dropped_and_reported() -> None:
    raw = orjson.dumps(
        {
            "version": 1,
            "chunks": [
                {"id": "../../../etc/passwd", "created_by": "mallory", "created_at": "t"},
                {"id": "aaaaaaaa/../../x", "created_by": "mallory", "created_at": "t"},
                {"id": "aaaaaaaa", "created_by": "alice", "created_at": "t"},
            ],
        }
    )
    reading = read_manifest(raw)
    assert list(reading.entries) == ["aaaaaaaa"]
    assert len(reading.problems) == 2
    assert "'../../../etc/passwd'" in reading.problems[0]


def conflicted(base: list[ManifestEntry], ours: list[ManifestEntry], theirs: list[ManifestEntry],
               *, diff3: bool = False) -> bytes:  # fmt: skip
    """What git leaves when two Go users each appended entries to the same manifest."""
    head = render_manifest(base).rsplit(b"\n  ]", 1)[0]
    if base:
        head += b","

    def body(items: list[ManifestEntry]) -> bytes:
        text = render_manifest(items).split(b'"chunks": [\n', 1)[1].rsplit(b"\n  ]", 1)[0]
        return text + b"\n"

    middle = b"<<<<<<< HEAD\n" + body(ours)
    if diff3:
        middle += b"||||||| base\n"
    middle += b"=======\n" + body(theirs) + b">>>>>>> origin/main\n"
    return head + b"\n" + middle + b"  ]\n}"


def test_conflict_markers_keep_every_entry_of_both_sides_in_order() -> None:
    base = [entry("00000001", "carol", "2026-01-01T00:00:00Z")]
    ours = [entry("aaaaaaaa", "gina", "2026-01-02T00:00:00Z")]
    theirs = [
        entry("bbbbbbbb", "gus", "2026-01-02T00:00:05Z"),
        entry("cccccccc", "gus", "2026-01-02T00:00:09Z"),
    ]
    for diff3 in (False, True):
        raw = conflicted(base, ours, theirs, diff3=diff3)
        assert b"<<<<<<<" in raw
        reading = read_manifest(raw)
        assert reading.state == "conflicted" and not reading.readable
        assert "conflict markers" in reading.problems[0]
        assert list(reading.entries.values()) == [*base, *ours, *theirs]
        repaired = render_manifest(reading.entries.values(), reading.version)
        assert read_manifest(repaired).state == "ok"
        assert json.loads(repaired)["chunks"][1] == {
            "id": "aaaaaaaa",
            "created_by": "gina",
            "created_at": "2026-01-02T00:00:00Z",
            "sessions": 1,
            "memories": 2,
            "prompts": 3,
        }


def test_add_add_conflict_of_two_new_manifests() -> None:
    """Both Go users created the manifest (``CONFLICT (add/add)``): the whole file differs."""
    ours = render_manifest([entry("aaaaaaaa", "gina")])
    theirs = render_manifest([entry("bbbbbbbb", "gus")])
    raw = b"<<<<<<< HEAD\n" + ours + b"\n=======\n" + theirs + b"\n>>>>>>> theirs\n"
    sides = conflict_sides(raw)
    assert sides is not None and orjson.loads(sides[0]) == orjson.loads(ours)
    reading = read_manifest(raw)
    assert list(reading.entries) == ["aaaaaaaa", "bbbbbbbb"]
    assert conflict_sides(ours) is None


def test_union_merged_garbage_is_invalid_but_salvaged() -> None:
    # What the union merge an earlier Engram set on the manifest produced: a missing comma.
    a = render_manifest([entry("aaaaaaaa")]).split(b"\n")
    b = render_manifest([entry("bbbbbbbb")]).split(b"\n")
    merged = b"\n".join(a[:-2] + b[3:-2] + a[-2:])
    reading = read_manifest(merged)
    assert reading.state == "invalid" and not reading.readable
    assert list(reading.entries) == ["aaaaaaaa", "bbbbbbbb"]
    broken = read_manifest(b'{"version": 1, "chunks": [ {"id": "aaaaaaaa"}, ')
    assert broken.state == "invalid"
    assert list(broken.entries) == ["aaaaaaaa"]

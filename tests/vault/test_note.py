"""The vault's file format, checked as Obsidian reads it: YAML front matter a YAML parser
accepts, ``[[wikilinks]]`` for relations, the blocks as headings, readable file names."""

from __future__ import annotations

import re

import pytest
import yaml

from engram.text import split_blocks
from engram.vault.note import NoteError, note_name, parse_note, render_note

MEMORY = {
    "id": 7,
    "sync_id": "obs-1a2b3c4d5e6f7a8b",
    "type": "decision",
    "title": "Auth model",
    "content": "**What**: JWT in cookies **Why**: XSS: no tokens in JS\n**Where**: auth/\n"
    "**Learned**: SameSite=Lax is enough",
    "topic_key": "architecture/auth",
    "project": "acme",
    "scope": "project",
    "created_at": "2026-11-21 10:00:00",
    "updated_at": "2026-11-21 10:05:00",
    "deleted_at": None,
}


def front_matter(text: str) -> dict:
    match = re.match(r"\A---\n(.*?)\n---\n", text, re.S)
    assert match, text
    return yaml.safe_load(match.group(1))


def test_a_note_has_front_matter_a_title_and_the_blocks_as_headings() -> None:
    text = render_note(MEMORY)
    meta = front_matter(text)
    assert meta == {
        "id": 7,
        "sync_id": "obs-1a2b3c4d5e6f7a8b",
        "type": "decision",
        "topic": "architecture/auth",
        "project": "acme",
        "scope": "project",
        "created": "2026-11-21T10:00:00Z",
        "updated": "2026-11-21T10:05:00Z",
    }
    body = text.split("---\n", 2)[2]
    assert body.startswith("# Auth model\n\n## What\nJWT in cookies\n\n## Why\nXSS: no tokens")
    assert "## Where\nauth/" in body and "## Learned\nSameSite=Lax is enough" in body
    # Each key on its own line: what Obsidian's properties view expects.
    assert "\nsync_id: obs-1a2b3c4d5e6f7a8b\n" in text


def test_relations_are_wikilinks_and_importance_appears_only_when_known() -> None:
    plain = front_matter(render_note(MEMORY))
    assert "relations" not in plain and "importance" not in plain
    text = render_note(
        MEMORY, importance=0.8, relations={"supersedes": ["Old auth model"], "relates": []}
    )
    meta = front_matter(text)
    assert meta["importance"] == 0.8
    assert meta["relations"] == {"supersedes": ["[[Old auth model]]"]}
    assert "[[Old auth model]]" in text  # a link Obsidian's graph and backlinks resolve


def test_parsing_a_rendered_note_gives_the_memory_back_and_rendering_is_a_fixpoint() -> None:
    text = render_note(MEMORY)
    fields = parse_note(text, fallback_title="ignored")
    assert (fields.title, fields.type, fields.topic, fields.sync_id) == (
        "Auth model", "decision", "architecture/auth", "obs-1a2b3c4d5e6f7a8b",
    )  # fmt: skip
    assert [(b.label, b.text) for b in split_blocks(fields.content)] == [
        (b.label, b.text) for b in split_blocks(MEMORY["content"])
    ]
    again = render_note({**MEMORY, "content": fields.content})
    assert again == text


def test_a_hand_written_note_without_front_matter_or_title() -> None:
    fields = parse_note("Just some text\n\nwith lines\n", fallback_title="My idea")
    assert fields.title == "My idea" and fields.content == "Just some text\n\nwith lines"
    assert fields.sync_id is None and fields.meta == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("---\ntype: [unclosed\n---\n# t\nbody", "not valid YAML"),
        ("---\n- a\n- b\n---\n# t\nbody", "mapping"),
        ("---\ntype: x\n# t\nbody", "closing"),
        ("---\ntype: {a: 1}\n---\n# t\nbody", "'type' must be text"),
    ],
)
def test_bad_front_matter_is_a_clear_error(text: str, words: str) -> None:
    with pytest.raises(NoteError, match=re.escape(words)):
        parse_note(text, fallback_title="x")


def test_yaml_tags_never_build_python_objects() -> None:
    with pytest.raises(NoteError):
        parse_note(
            "---\ntype: !!python/object/apply:os.system ['true']\n---\nbody", fallback_title="x"
        )


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Fix: login / logout [bug]?", "Fix login logout bug"),
        ("  ..hidden  ", "hidden"),
        ("", "Untitled"),
        ("x" * 200, "x" * 80),
        ("Ünïcode ok", "Ünïcode ok"),
    ],
)
def test_file_names_are_readable_and_safe(title: str, name: str) -> None:
    assert note_name(title) == name

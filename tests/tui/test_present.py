"""The pure presentation rules: What / Why / Where / Learned blocks, positions, previews, and
the two-line list items."""

from __future__ import annotations

from engram.store import Observation, Session
from engram.store.models import NO_INTENT
from engram.text import Block, one_line, split_blocks
from engram.tui.gateway import ObservationRow
from engram.tui.items import observation_item, session_item
from engram.tui.lazylist import Line
from engram.tui.present import position_text


def test_blocks_of_the_structured_format() -> None:
    content = "**What**: fixed it\n**Why**: it broke\n**Where**: a.py\n**Learned**: check first"
    assert split_blocks(content) == [
        Block("What", "fixed it"),
        Block("Why", "it broke"),
        Block("Where", "a.py"),
        Block("Learned", "check first"),
    ]


def test_blocks_accept_the_usual_variants_and_multi_line_text() -> None:
    content = (
        "Context first.\n"
        "## What\n"
        "line one\n"
        "line two\n"
        "- **Why** — because\n"
        "where: lower case works\n"
        "__Learned__:\n"
        "  indented text\n"
    )
    assert split_blocks(content) == [
        Block("", "Context first."),
        Block("What", "line one\nline two"),
        Block("Why", "because"),
        Block("Where", "lower case works"),
        Block("Learned", "  indented text"),
    ]


def test_text_that_merely_mentions_a_label_stays_text() -> None:
    content = "Why this matters: speed.\nWe learned what works."
    assert split_blocks(content) == [Block("", content)]
    assert split_blocks("") == []


def test_blocks_written_on_one_line_are_split_too() -> None:
    """The MCP mem_save description and the README write every block on one line."""
    content = "**What**: memories live in SQLite **Why**: zero setup, works offline"
    assert split_blocks(content) == [
        Block("What", "memories live in SQLite"),
        Block("Why", "zero setup, works offline"),
    ]
    assert split_blocks("**What:** a **Where:** b.py __Learned__ — c") == [
        Block("What", "a"),
        Block("Where", "b.py"),
        Block("Learned", "c"),
    ]
    # Mid-line, only a bold label followed by a colon or dash starts a block.
    for text in ("We asked why: because.", "text **Why** it matters", "a **what** b"):
        assert split_blocks(text) == [Block("", text)]


def test_position_text() -> None:
    assert position_text(21, 40, 312) == "21–40 of 312"
    assert position_text(1, 20, 100_000) == "1–20 of 100,000"
    assert position_text(1, 50, 7) == "1–7 of 7"
    assert position_text(1, 1, 0) == "0 of 0"
    assert position_text(1, 1, None) == "loading…"


def test_previews_are_one_line_without_bold_markers() -> None:
    assert one_line("**What**: a\n\n  b\tc") == "What: a b c"
    long = "word " * 200
    cut = one_line(long, 50)
    assert len(cut) == 50 and cut.endswith("…")


def plain_lines(lines: tuple[Line, Line]) -> str:
    return "\n".join("".join(fragment for fragment, _ in line) for line in lines)


def _observation(**changes) -> Observation:
    fields = dict(
        id=12,
        sync_id="obs-1",
        session_id="s-1",
        type="bugfix",
        title="Fixed it",
        content="**What**: the fix",
        tool_name=None,
        project="acme",
        scope="project",
        topic_key=None,
        revision_count=1,
        duplicate_count=1,
        last_seen_at=None,
        created_at="2026-11-21 10:05:33",
        updated_at="2026-11-21 10:05:33",
        deleted_at=None,
        **NO_INTENT,
    )
    fields.update(changes)
    return Observation(**fields)


def test_observation_item_lines() -> None:
    text = plain_lines(observation_item(ObservationRow(_observation(), active=True)))
    assert text == "#12 bugfix ● active Fixed it\nacme · 2026-11-21 10:05  What: the fix"
    text = plain_lines(observation_item(ObservationRow(_observation(project=""), active=False)))
    assert text == "#12 bugfix Fixed it\n2026-11-21 10:05  What: the fix"


def test_session_item_lines() -> None:
    session = Session("s-1", "acme", "/src/acme", "2026-11-21 10:00:00", None, None, 1)
    assert plain_lines(session_item(session)) == (
        "s-1 ● active acme 1 memory\nstarted 2026-11-21 10:00 · /src/acme"
    )
    ended = Session("s-2", "", "", "2026-11-21 10:00:00", "2026-11-21 11:00:00", "did X", 3)
    assert plain_lines(session_item(ended)) == (
        "s-2 (no project) 3 memories\nstarted 2026-11-21 10:00 · ended 2026-11-21 11:00  did X"
    )

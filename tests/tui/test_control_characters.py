"""Escape sequences stored in memories, sessions, prompts and project names reach the terminal as
visible text on every screen and dialog of the TUI — never as sequences the terminal obeys
(OSC 52 writes the clipboard, ESC [2J clears the screen) — and the store keeps them intact."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from engram.settings import Config
from engram.store import Store
from engram.tui.detail import ObservationScreen, SessionScreen, TimelineScreen
from engram.tui.dialogs import ConfirmScreen, EditScreen, MessageScreen, ProjectScreen
from tests.tui.helpers import make_app, screen_text, terminal_bytes, wait_for, wait_text

pytestmark = pytest.mark.anyio
SIZE = (120, 40)

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
CLEAR = "\x1b[2J"
LEAVE = "\x1b[?1049l"  # leaves the alternate screen: the TUI would vanish under the user
TITLE = f"Deploy notes{CLIPBOARD}"
CONTENT = f"**What**: ran it{CLEAR}\n**Why**: because{LEAVE}\x9b31m"
PROJECT = "acme\x1b[2j"
SESSION = f"s-{LEAVE}"
PROMPT = f"please {CLIPBOARD} deploy"
#: Sequences a screen must never send: each comes from a stored field, never from Textual.
FORBIDDEN = ("\x1b]52", "\x1b[2J", "\x1b[2j", "\x1b[?1049l", "\x9b")


def assert_safe(app, *visible: str) -> None:
    sent = terminal_bytes(app)
    for sequence in FORBIDDEN:
        assert sequence not in sent, f"{sequence!r} reached the terminal on {app.screen!r}"
    shown = screen_text(app)
    for text in visible:
        assert text in shown, f"{text!r} not on screen:\n{shown}"


@pytest.fixture
def hostile(data_dir: Path) -> tuple[Path, int]:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.create_session(SESSION, PROJECT, f"/src/{CLEAR}acme")
        store.add_prompt(PROMPT, session_id=SESSION, project=PROJECT)
        oid = store.add_observation(
            title=TITLE,
            content=CONTENT,
            type=f"bugfix{CLEAR}",
            project=PROJECT,
            session_id=SESSION,
            topic_key=f"ops/{LEAVE}",
        ).observation.id
        store.add_observation(
            title="Plain neighbour", content="saved next", project=PROJECT, session_id=SESSION
        )
        store.end_session(SESSION, f"summary {CLIPBOARD}")
        store.journal.mark_delivered(f"git:/src/{CLEAR}/.engram", [1])  # a sync directory
    return data_dir, oid


async def test_every_screen_shows_control_characters_as_text(hostile: tuple[Path, int]) -> None:
    data_dir, oid = hostile
    app = make_app(data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Deploy notes\\x1b]52;c;")  # the dashboard's recent activity
        await wait_text(pilot, "Sync: git /src/\\x1b[2J/.engram")
        assert_safe(app, "acme\\x1b[2j")

        await pilot.press("s", *"deploy")
        await wait_for(pilot, lambda: app.screen.shown_query == "deploy", "search results")
        assert_safe(app, "Deploy notes\\x1b]52;c;")

        await app.open(ObservationScreen(oid))
        await wait_text(pilot, "ran it\\x1b[2J")
        assert_safe(app, "bugfix\\x1b[2J", "because\\x1b[?1049l\\x9b31m", "ops/\\x1b[?1049l")

        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "delete question")
        assert_safe(app, "Deploy notes\\x1b]52;c;")
        await pilot.press("n")

        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        assert app.screen.query_one("#edit-title", Input).value == "Deploy notes" + (
            "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07"
        )
        assert_safe(app)
        await pilot.press("ctrl+s")  # nothing edited: nothing is written back
        await wait_for(pilot, lambda: isinstance(app.screen, ObservationScreen), "dismissed")

        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen), "the timeline")
        await wait_text(pilot, "Plain neighbour")
        assert_safe(app, "Session s-\\x1b[?1049l", "Deploy notes\\x1b]52;c;")
        await pilot.press("escape")

        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), "the session")
        await wait_text(pilot, "summary \\x1b]52;c;")
        assert_safe(app, "/src/\\x1b[2Jacme", "please \\x1b]52;c;")
        await pilot.press("tab", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MessageScreen), "the prompt")
        assert_safe(app, "please \\x1b]52;c;")
        await pilot.press("escape")

        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ProjectScreen), "projects")
        await wait_text(pilot, "acme\\x1b[2j")
        assert_safe(app)
        await pilot.press("down", "down", "enter")  # past "All projects" to the project
        await wait_for(pilot, lambda: app.project == PROJECT, "the project filter")
        # The filter uses the real name; the notification shows it escaped.
        assert "Showing acme\\x1b[2j" in [n.message for n in app._notifications]
        assert_safe(app, "project: acme\\x1b[2j")

    with Store.open(config=Config(data_dir=data_dir)) as store:
        kept = store.get_observation(oid)
        assert (kept.title, kept.content, kept.project) == (TITLE, CONTENT, PROJECT)

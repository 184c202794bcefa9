"""Actions on a memory — soft delete, edit, copy — each asks first, and "no" changes nothing."""

from __future__ import annotations

import pytest

from engram.errors import NotFoundError
from engram.tui.detail import ObservationScreen
from engram.tui.dialogs import ConfirmScreen, EditScreen
from engram.tui.lists import RecentScreen
from tests.tui.helpers import (
    Seeded,
    make_app,
    on_screen,
    screen_text,
    snapshot,
    wait_for,
    wait_text,
)

pytestmark = pytest.mark.anyio
SIZE = (110, 36)


async def open_memory(pilot, app, title: str) -> None:
    """From the dashboard: recent observations, move to ``title``, open it."""
    await wait_text(pilot, "Recent activity")
    await pilot.press("o")
    await wait_text(pilot, "1–7 of 7")
    lazy = app.screen.query_one("LazyList")
    while lazy.current.observation.title != title:
        await pilot.press("j")
    await pilot.press("enter")
    assert isinstance(app.screen, ObservationScreen)
    await wait_text(pilot, title)


async def test_soft_delete_asks_and_no_keeps_the_memory(seeded: Seeded) -> None:
    oid = seeded.ids["cookie"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Session cookie must be HttpOnly")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        text = screen_text(app)
        assert f"Delete #{oid} “Session cookie must be HttpOnly”?" in text
        snapshot(app, "confirm-delete")
        await pilot.press("n")
        assert isinstance(app.screen, ObservationScreen)
        assert seeded.store.get_observation(oid).deleted_at is None

        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("enter")  # the focused button is Cancel: a stray Enter deletes nothing
        assert isinstance(app.screen, ObservationScreen)
        assert seeded.store.get_observation(oid).deleted_at is None

        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RecentScreen), "back to the list")
        await wait_text(pilot, "1–6 of 6")
        assert "Session cookie must be HttpOnly" not in screen_text(app)
    with pytest.raises(NotFoundError):
        seeded.store.get_observation(oid)
    assert seeded.store.get_observation(oid, include_deleted=True).deleted_at  # soft: still there


async def test_edit_title_type_topic_with_confirmation(seeded: Seeded) -> None:
    oid = seeded.ids["postgres"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Chose PostgreSQL for the cloud server")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        snapshot(app, "edit")
        await pilot.press("end", "ctrl+u", *"Use PostgreSQL 16", "tab")
        await pilot.press("end", "ctrl+u", *"architecture", "tab")
        await pilot.press(*"architecture/database", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        text = screen_text(app)
        assert "title: “Chose PostgreSQL for the cloud server” → “Use PostgreSQL 16”" in text
        assert "type: “decision” → “architecture”" in text
        assert "topic: “” → “architecture/database”" in text
        await pilot.press("y")
        await wait_text(pilot, "Use PostgreSQL 16")
    saved = seeded.store.get_observation(oid)
    assert (saved.title, saved.type, saved.topic_key) == (
        "Use PostgreSQL 16",
        "architecture",
        "architecture/database",
    )
    assert saved.revision_count == 2


async def test_edit_refuses_an_empty_title_and_cancel_changes_nothing(seeded: Seeded) -> None:
    oid = seeded.ids["retry"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Retry with backoff")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        await pilot.press("end", "ctrl+u", "ctrl+s")
        assert isinstance(app.screen, EditScreen)
        assert "The title cannot be empty." in screen_text(app)
        await pilot.press(*"Something else", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("n")  # declined at the last step
        assert isinstance(app.screen, ObservationScreen)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        await pilot.press(*" more", "escape")
        assert isinstance(app.screen, ObservationScreen)
    saved = seeded.store.get_observation(oid)
    assert saved.title == "Retry with backoff" and saved.revision_count == 1


async def test_copy_asks_then_puts_the_content_on_the_clipboard(seeded: Seeded) -> None:
    content = seeded.store.get_observation(seeded.ids["login"]).content
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await open_memory(pilot, app, "Fixed login timeout")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert f"({len(content)} characters)" in screen_text(app)
        await pilot.press("n")
        assert app.clipboard == ""
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        assert app.clipboard == content
        await wait_text(pilot, "Copied the content of")


async def test_detail_scrolls_long_content(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Deploy runbook")
        text = screen_text(app)
        assert "Step 1:" in text and "Step 80:" not in text
        await pilot.press("end")
        await wait_text(pilot, "Step 80:")
        await pilot.press("home", "j", "j")
        # Scrolling is animated and the machine may be busy: wait for where it must end up.
        await wait_for(
            pilot,
            lambda: not on_screen(app, "Step 1:") and on_screen(app, "Step 3:"),
            "two lines scrolled down",
        )
        await pilot.press("k", "k")
        await wait_text(pilot, "Step 1:")


async def test_a_keypress_in_the_edit_dialog_adds_to_the_title(seeded: Seeded) -> None:
    """Issue 17 item 12: the edit dialog no longer selects the whole title, so the first
    keypress adds to it instead of replacing it."""
    oid = seeded.ids["cookie"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Session cookie must be HttpOnly")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        await pilot.press(*" and Secure", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        question = app.screen.question  # (on screen the dialog wraps it)
        assert "→ “Session cookie must be HttpOnly and Secure”" in question
        await pilot.press("y")
        await wait_text(pilot, "HttpOnly and Secure")
    assert seeded.store.get_observation(oid).title == "Session cookie must be HttpOnly and Secure"


async def test_edit_the_content_in_the_dialog_then_see_the_earlier_version(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17 items 11 and 12: without $EDITOR, E opens the edit dialog on the content (an
    in-app text area); the saved edit keeps the old text as a version that h shows."""
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    oid = seeded.ids["cookie"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Session cookie must be HttpOnly")
        await pilot.press("E")
        await wait_for(pilot, lambda: isinstance(app.screen, EditScreen), "the edit dialog")
        assert app.screen.focused is not None and app.screen.focused.id == "edit-content"
        await pilot.press("enter", *"Also Secure on HTTPS.", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        n = len("Set HttpOnly and SameSite=Lax on the session cookie.")
        question = app.screen.question
        assert f"content: 1 line, {n} characters → 2 lines, {n + 22} characters" in question
        await pilot.press("y")
        await wait_text(pilot, "Also Secure on HTTPS.")
        await pilot.press("h")
        shown = await wait_text(pilot, "Versions of #")
        assert "1 earlier version" in shown and "SameSite=Lax on the session cookie." in shown
    saved = seeded.store.get_observation(oid)
    assert saved.content.endswith("\nAlso Secure on HTTPS.")
    assert seeded.store.history(oid).revisions[0].content.startswith("Set HttpOnly")


async def test_star_pins_and_unpins_and_the_screen_shows_importance(seeded: Seeded) -> None:
    """Issue 21: a memory's screen shows its importance and reads, `*` pins it (synced intent)
    and unpins it; opening it counts as a read."""
    oid = seeded.ids["cookie"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await open_memory(pilot, app, "Session cookie must be HttpOnly")
        await wait_text(pilot, "importance 0.")
        await pilot.press("asterisk")
        await wait_text(pilot, "pinned")
        assert seeded.store.get_observation(oid).pinned
        await pilot.press("asterisk")
        await wait_for(pilot, lambda: not seeded.store.get_observation(oid).pinned, "unpinned")
    assert (
        seeded.store.access.pending_counts().get(
            ("acme", seeded.store.get_observation(oid).sync_id)
        )
        == 1
    )

"""Bad input gets a clear message and loses nothing: an empty store, a store locked by another
process, FTS syntax typed into search, a terminal too small to draw, and a memory deleted by
another process while it is on screen."""

from __future__ import annotations

import asyncio

import pytest

from engram.settings import Config
from engram.store import Store
from engram.tui.detail import ObservationScreen, TimelineScreen
from engram.tui.dialogs import ConfirmScreen
from engram.tui.lists import SearchScreen
from tests.support import run_engram
from tests.tui.helpers import (
    Seeded,
    database_locked,
    make_app,
    release,
    screen_text,
    snapshot,
    wait_for,
    wait_text,
)

pytestmark = pytest.mark.anyio
SIZE = (110, 36)


async def test_empty_store_has_friendly_empty_states(data_dir) -> None:
    app = make_app(data_dir)
    async with app.run_test(size=SIZE) as pilot:
        text = await wait_text(pilot, "No memories yet.")
        assert "engram save" in text  # says how memories get there
        assert str(app.screen.query_one("#stat-observations").render()).endswith("\n0")
        snapshot(app, "empty-dashboard")
        await pilot.press("o")
        await wait_text(pilot, "No memories yet.")
        await pilot.press("enter", "t")  # nothing selected: nothing happens, nothing breaks
        await pilot.press("escape", "e")
        await wait_text(pilot, "No sessions yet.")
        await pilot.press("escape", "s", *"anything")
        await wait_text(pilot, "No memories match “anything”.")
        await pilot.press("escape", "p")
        await wait_text(pilot, "All projects")


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "login AND (",
        "NEAR(login timeout",
        "title:login",
        "-login",
        "login*",
        "login OR",
        "'; DROP TABLE observations; --",
        "***",
        "nowhere/unknown-topic",
    ],
)
async def test_fts_syntax_typed_into_search_is_just_text(seeded: Seeded, query: str) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("s", *query)
        await wait_for(pilot, lambda: app.screen.shown_query == query, "the results")
        text = screen_text(app)
        assert "search failed" not in text and "Error" not in text
        if "login" in query:
            assert "Fixed login timeout" in text
        else:
            assert "No memories match" in text
        assert isinstance(app.screen, SearchScreen)
    assert seeded.store.count_observations() == 7


async def test_terminal_too_small_shows_a_message_then_recovers(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=(40, 10)) as pilot:
        text = await wait_text(pilot, "The terminal is too small")
        assert "at least 50×12" in text
        snapshot(app, "too-small")
        await pilot.press("o", "j", "enter", "s", *"login")  # keys keep working underneath
        await pilot.resize_terminal(100, 30)
        text = await wait_text(pilot, "Fixed login timeout")
        assert "too small" not in text
        assert isinstance(app.screen, SearchScreen)
        await pilot.resize_terminal(45, 20)
        await wait_text(pilot, "too small")
        await pilot.press("question_mark")  # a dialog in a tiny terminal: the same notice
        await wait_text(pilot, "too small")


async def test_memory_deleted_by_another_process_while_on_screen(seeded: Seeded) -> None:
    oid = seeded.ids["retry"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o")
        await wait_text(pilot, "1–7 of 7")
        lazy = app.screen.query_one("LazyList")
        while lazy.current.observation.id != oid:
            await pilot.press("j")
        await pilot.press("enter")
        await wait_text(pilot, "Exponential backoff with jitter")

        done = await asyncio.to_thread(run_engram, "delete", str(oid), data_dir=seeded.data_dir)
        assert done.returncode == 0, done.stderr

        await pilot.press("r")
        text = await wait_text(pilot, f"Memory #{oid} no longer exists")
        assert "Exponential backoff with jitter" not in text
        snapshot(app, "deleted-while-on-screen")
        for key in ("d", "e", "c", "t"):  # every action checks first, none acts on a ghost
            await pilot.press(key)
            await pilot.pause(0.3)
            assert isinstance(app.screen, ObservationScreen), key
        await pilot.press("escape")
        lazy = app.screen.query_one("LazyList")
        await wait_for(pilot, lambda: lazy.total == 6, "the list without it")
        assert "Exponential backoff with jitter" not in screen_text(app)


async def test_timeline_of_a_memory_deleted_meanwhile(seeded: Seeded) -> None:
    oid = seeded.ids["cookie"]
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o")
        await wait_text(pilot, "1–7 of 7")
        lazy = app.screen.query_one("LazyList")
        while lazy.current.observation.id != oid:
            await pilot.press("j")
        seeded.store.delete_observation(oid)  # another connection, as another process would
        await pilot.press("t")
        assert isinstance(app.screen, TimelineScreen)
        await wait_text(pilot, f"Memory #{oid} no longer exists")


@pytest.mark.slow
async def test_store_locked_by_another_process_while_opening(seeded: Seeded) -> None:
    """Even reads wait: the TUI says so, stays responsive, and shows the data once free."""
    db = seeded.store.path
    seeded.store.close()
    with database_locked(db, readers_too=True) as holder:
        app = make_app(seeded.data_dir)
        async with app.run_test(size=SIZE) as pilot:
            text = await wait_text(pilot, "Waiting for the database")
            assert "another process may be holding a lock" in text and "engram.db" in text
            snapshot(app, "waiting-for-lock")
            await pilot.press("question_mark")  # the UI thread is free: keys still work
            await wait_text(pilot, "Ctrl+C")
            await pilot.press("escape")
            release(holder)
            await wait_text(pilot, "Fixed login timeout")
            await wait_for(pilot, lambda: "Waiting for the database" not in screen_text(app))


@pytest.mark.slow
async def test_store_still_locked_after_the_timeout_reports_and_retries(seeded: Seeded) -> None:
    db = seeded.store.path
    seeded.store.close()
    with database_locked(db, readers_too=True) as holder:
        app = make_app(seeded.data_dir, busy_timeout_ms=1500)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            text = " ".join((await wait_text(pilot, "Cannot read the store")).split())
            assert "is locked by another process" in text and "Press r to retry" in text
            await wait_text(pilot, "Could not load this list")
            release(holder)
            await pilot.press("r")
            await wait_text(pilot, "Fixed login timeout")


@pytest.mark.slow
async def test_write_while_another_process_holds_the_lock_loses_nothing(seeded: Seeded) -> None:
    oid = seeded.ids["cookie"]
    with database_locked(seeded.store.path) as holder:
        app = make_app(seeded.data_dir, busy_timeout_ms=2500)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_text(pilot, "Recent activity")  # reads go on while a writer holds it
            await pilot.press("o")
            await wait_text(pilot, "1–7 of 7")
            lazy = app.screen.query_one("LazyList")
            while lazy.current.observation.id != oid:
                await pilot.press("j")
            await pilot.press("enter")
            await wait_text(pilot, "Session cookie must be HttpOnly")
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await wait_text(pilot, "Waiting for the database")
            text = await wait_text(pilot, "is locked by another process")
            assert isinstance(app.screen, ObservationScreen)  # still showing the memory
            assert "Session cookie must be HttpOnly" in text

            release(holder)
            with Store.open(config=Config(data_dir=seeded.data_dir)) as other:
                assert other.get_observation(oid).deleted_at is None  # nothing half-done

            await pilot.press("d")  # once free, the same action works
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await wait_for(pilot, lambda: not isinstance(app.screen, ObservationScreen), "gone")
    assert seeded.store.get_observation(oid, include_deleted=True).deleted_at

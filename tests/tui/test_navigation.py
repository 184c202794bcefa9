"""Driving the TUI headless with Textual's Pilot: every screen, every key, what ends up on
screen — against a real seeded store. SVG snapshots of the main screens are kept in
``test-artifacts/tui/``."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from engram.tui.detail import ObservationScreen, SessionScreen, TimelineScreen
from engram.tui.dialogs import HelpScreen, MessageScreen, ProjectScreen
from engram.tui.lazylist import LazyList
from engram.tui.lists import RecentScreen, SearchScreen, SessionsScreen
from tests.tui.helpers import Seeded, make_app, screen_text, snapshot, wait_for, wait_text

pytestmark = pytest.mark.anyio
SIZE = (110, 36)


async def test_dashboard_shows_counts_recent_activity_and_sync(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        text = await wait_text(pilot, "Fixed login timeout")
        assert "Observations" in text and "Sessions" in text and "Prompts" in text
        stats = {
            key: str(app.screen.query_one(f"#stat-{key}").render()).split("\n")[-1]
            for key in ("observations", "sessions", "prompts", "projects")
        }
        assert stats == {"observations": "7", "sessions": "3", "prompts": "2", "projects": "2"}
        assert "Sync: not configured" in text
        assert str(seeded.store.path) in text
        # Content is data, never markup: the brackets of a title are shown as typed.
        assert "Parser handles unicode [bold]markup[/bold]" in text
        snapshot(app, "dashboard")


async def test_dashboard_shows_cloud_and_git_sync(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.sync.cloud.config import save_cloud_config
    from engram.sync.cloud.state import enroll

    for name in ("ENGRAM_CLOUD_SERVER", "ENGRAM_CLOUD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    save_cloud_config(seeded.data_dir, "http://127.0.0.1:9")
    enroll(seeded.store, "zeta")
    seeded.store.journal.mark_delivered("git:/src/acme/.engram", [1])
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        text = await wait_text(pilot, "to push (zeta)")
        assert "Sync: cloud http://127.0.0.1:9 — " in text and "git /src/acme/.engram" in text


async def test_find_a_memory_read_it_jump_to_its_timeline_and_back(seeded: Seeded) -> None:
    """The issue's "done when": search by typing, read, timeline and back, keyboard only."""
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("s")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"login timeout")
        await wait_for(pilot, lambda: app.screen.shown_query == "login timeout", "results")
        text = screen_text(app)
        assert "Results for “login timeout”" in text
        assert "Fixed login timeout" in text
        snapshot(app, "search-results")

        await pilot.press("enter")  # from the query to the results
        results = app.screen.query_one("#results", LazyList)
        assert results.has_focus
        assert results.current.observation.title == "Fixed login timeout"
        await pilot.press("enter")
        assert isinstance(app.screen, ObservationScreen)
        text = await wait_text(pilot, "Users on slow VPNs")
        for label in ("What", "Why", "Where", "Learned"):
            assert f" {label} " in text  # each block has its own heading line
        assert "src/auth/login.py, config/redis.yml" in text
        assert "**What**" not in text
        snapshot(app, "observation-detail")

        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen), "timeline")
        text = await wait_text(pilot, "◆ this memory")
        assert "Chose PostgreSQL for the cloud server" in text  # saved after it, same session
        assert "Cache warmup on deploy" not in text  # another session
        assert "Session s-acme-1 · acme" in text
        snapshot(app, "timeline")

        await pilot.press("escape")
        assert isinstance(app.screen, ObservationScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, SearchScreen)
        assert "Fixed login timeout" in screen_text(app)
        await pilot.press("escape")
        await wait_text(pilot, "Recent activity")


async def test_list_keys_move_open_and_show_the_position(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o")
        assert isinstance(app.screen, RecentScreen)
        text = await wait_text(pilot, "1–7 of 7")
        lines = [line for line in text.splitlines() if "#" in line]
        # newest first, and the memories of the open session carry the badge
        assert "Parser handles unicode" in lines[0]
        retry = next(line for line in lines if "Retry with backoff" in line)
        login = next(line for line in lines if "Fixed login timeout" in line)
        assert "● active" in retry and "● active" not in login
        snapshot(app, "recent")

        lazy = app.screen.query_one(LazyList)
        await pilot.press("j", "j", "down")
        assert lazy.cursor == 3
        await pilot.press("k", "up")
        assert lazy.cursor == 1
        await pilot.press("G")
        assert lazy.cursor == 6
        await pilot.press("g")
        assert lazy.cursor == 0
        await pilot.press("end", "enter")
        assert isinstance(app.screen, ObservationScreen)
        await wait_text(pilot, "Fixed login timeout")
        await pilot.press("q")
        assert isinstance(app.screen, RecentScreen)
        await pilot.press("t")  # timeline of the selected memory, straight from the list
        assert isinstance(app.screen, TimelineScreen)
        await wait_text(pilot, "◆ this memory")
        await pilot.press("enter")  # the focus entry opens its detail
        assert isinstance(app.screen, ObservationScreen)


async def test_long_lists_load_lazily_page_by_page(data_dir) -> None:
    from engram.settings import Config
    from engram.store import Store
    from tests.tui.helpers import seed_many

    with Store.open(config=Config(data_dir=data_dir)) as store:
        seed_many(store, 312)
    app = make_app(data_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o")
        lazy = app.screen.query_one(LazyList)
        await wait_for(pilot, lambda: lazy.total == 312, "the count")
        text = await wait_text(pilot, "of 312")
        assert "Bulk memory 312" in text
        first, last = lazy.visible_range()
        assert (first, last) == (1, 13)
        assert f"1–{last} of 312" in text
        assert set(lazy._pages) == {0}  # one page of 50, not 312 rows

        await pilot.press("pagedown", "pagedown")
        await wait_for(pilot, lambda: lazy.visible_range()[0] > 13, "scrolled")
        first, last = lazy.visible_range()
        assert f"{first}–{last} of 312" in screen_text(app)

        await pilot.press("end")
        await wait_text(pilot, "Bulk memory 1 ")
        assert "312 of 312" in screen_text(app)
        # Only the pages on screen were read (items 300–312 span pages 5 and 6), never 1–4.
        assert set(lazy._pages) == {0, 5, 6}
        snapshot(app, "recent-last-page")


async def test_search_results_load_more_as_the_list_nears_its_end(data_dir) -> None:
    from engram.settings import Config
    from engram.store import Store
    from tests.tui.helpers import seed_many

    with Store.open(config=Config(data_dir=data_dir)) as store:
        seed_many(store, 120)
    app = make_app(data_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("s", *"bulk memory", "enter")
        results = app.screen.query_one("#results", LazyList)
        await wait_for(pilot, lambda: results.total == 50, "the first page")
        assert "of 50+" in screen_text(app)  # more may exist
        await pilot.press("end")  # near the end: the next page is fetched
        await wait_for(pilot, lambda: results.total == 100, "the second page")
        await pilot.press("end")
        await wait_for(pilot, lambda: results.total == 120, "all of them")
        await pilot.press("end")
        await wait_text(pilot, "120 of 120")
        assert "120+" not in screen_text(app)
        titles = {row.observation.title for row in results.source.fetch(0, 1000)}
        assert titles == {f"Bulk memory {i}" for i in range(1, 121)}


async def test_sessions_list_and_session_detail(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("e")
        assert isinstance(app.screen, SessionsScreen)
        text = await wait_text(pilot, "1–3 of 3")
        active = next(line for line in text.splitlines() if "s-acme-2" in line)
        assert "● active" in active
        ended = next(line for line in text.splitlines() if "s-acme-1" in line)
        assert "● active" not in ended and "4 memories" in ended
        snapshot(app, "sessions")

        lazy = app.screen.query_one(LazyList)
        while lazy.current.id != "s-acme-1":
            await pilot.press("j")
        await pilot.press("enter")
        assert isinstance(app.screen, SessionScreen)
        text = await wait_text(pilot, "why does login time out on the VPN?")
        assert "Auth rework" in text and "4 memories · 1 prompt" in text
        assert "Fixed login timeout" in text and "Deploy runbook" in text
        snapshot(app, "session-detail")

        await pilot.press("tab")  # to the prompts
        assert app.screen.query_one("#session-prompts", LazyList).has_focus
        await pilot.press("enter")
        assert isinstance(app.screen, MessageScreen)
        await pilot.press("escape", "shift+tab", "enter")
        assert isinstance(app.screen, ObservationScreen)
        await wait_text(pilot, "Fixed login timeout")
        await pilot.press("o")  # the memory's session
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), "session")


async def test_help_overlay_lists_the_keys(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for needle in ("Ctrl+C", "search", "timeline of the selected memory", "back"):
            assert needle in text
        snapshot(app, "help")
        await pilot.press("s")  # a dialog owns the keyboard: no search opens behind it
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_search_opens_from_anywhere_with_s_or_slash(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o")
        await wait_text(pilot, "1–7 of 7")
        await pilot.press("enter")
        assert isinstance(app.screen, ObservationScreen)
        await pilot.press("slash")
        assert isinstance(app.screen, SearchScreen)
        query = app.screen.query_one("#query", Input)
        assert query.has_focus
        await pilot.press(*"redis")
        await wait_for(pilot, lambda: app.screen.shown_query == "redis", "results")
        await pilot.press("down")
        assert app.screen.query_one("#results", LazyList).has_focus
        await pilot.press("s")  # back to the query from the results
        assert query.has_focus and isinstance(app.screen, SearchScreen)


async def test_project_switcher_filters_every_screen(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("p")
        assert isinstance(app.screen, ProjectScreen)
        text = await wait_text(pilot, "zeta")
        assert "All projects" in text and "6 memories" in text
        snapshot(app, "project-switcher")
        await pilot.press(*"zet", "enter")
        assert app.project == "zeta"
        text = await wait_text(pilot, "project: zeta")
        await wait_for(
            pilot, lambda: "Fixed login timeout" not in screen_text(app), "acme memories gone"
        )
        assert "Parser handles unicode" in screen_text(app)
        await pilot.press("o")
        await wait_text(pilot, "1–1 of 1")
        await pilot.press("escape", "p")
        await wait_text(pilot, "All projects")
        await pilot.press("enter")  # "All projects" is first
        assert app.project is None
        await wait_text(pilot, "Fixed login timeout")


async def test_project_flag_starts_filtered(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir, project="acme")
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "project: acme")
        await wait_for(
            pilot,
            lambda: str(app.screen.query_one("#stat-observations").render()).endswith("6"),
            "acme counts",
        )


async def test_quit_keys(seeded: Seeded) -> None:
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("s", *"login")  # q typed in a search box is text, ctrl+c still quits
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Recent activity")
        await pilot.press("o", "escape", "q")
        await pilot.pause()
    assert app.return_code == 0

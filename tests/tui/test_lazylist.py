"""The paged list widget on its own: what a source that fails shows, and that pages are only
read when they come into view."""

from __future__ import annotations

import threading

import pytest
from textual.app import App, ComposeResult

from engram.errors import StoreUnavailableError
from engram.tui.lazylist import CallSource, LazyList
from tests.tui.helpers import screen_text, wait_for, wait_text

pytestmark = pytest.mark.anyio


def item(n: int):
    return [(f"item {n}", "title")], [(f"preview {n}", "preview")]


class ListApp(App[None]):
    def __init__(self, source) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield LazyList(item, title="Numbers", id="numbers")

    def on_mount(self) -> None:
        self.query_one(LazyList).set_source(self.source)


async def test_a_failing_source_says_why_instead_of_loading_forever() -> None:
    def broken(offset: int, limit: int) -> list[int]:
        raise ValueError("bad page")

    app = ListApp(CallSource(lambda: 10, broken))
    async with app.run_test(size=(60, 12)) as pilot:
        text = await wait_text(pilot, "Could not load this list:")
        assert "unexpected error: ValueError: bad page" in text
        assert "Press r to retry." in text


async def test_a_store_error_is_shown_as_the_store_words_it() -> None:
    def locked() -> int:
        raise StoreUnavailableError("database x is locked by another process")

    app = ListApp(CallSource(locked, lambda offset, limit: []))
    async with app.run_test(size=(60, 12)) as pilot:
        await wait_text(pilot, "database x is locked by another process")


async def test_only_pages_in_view_are_read_on_a_worker_thread() -> None:
    reads: list[tuple[int, int, bool]] = []

    def fetch(offset: int, limit: int) -> list[int]:
        reads.append((offset, limit, threading.current_thread() is threading.main_thread()))
        return list(range(offset, min(offset + limit, 10_000)))

    app = ListApp(CallSource(lambda: 10_000, fetch))
    async with app.run_test(size=(60, 12)) as pilot:
        lazy = app.query_one(LazyList)
        await wait_text(pilot, "item 0")
        assert "of 10,000" in screen_text(app)
        await pilot.press("end")
        await wait_text(pilot, "item 9999")
        await pilot.press("g")
        await wait_for(pilot, lambda: lazy.cursor == 0)
        assert {offset for offset, _, _ in reads} == {0, 9950}
        assert all(limit == 50 and not on_ui for _, limit, on_ui in reads)

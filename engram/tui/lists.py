"""The list screens: live search with its results, recent observations, and sessions.

Lists load page by page (see :mod:`engram.tui.lazylist`); each keystroke in the search box
starts a search at once on a worker thread and supersedes (interrupts) the previous one, so the
results follow typing without a debounce delay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input

from engram.errors import EngramError
from engram.store import Session
from engram.tui.base import EngramScreen
from engram.tui.gateway import (
    SEARCH_CAP,
    SEARCH_PAGE,
    Gateway,
    ObservationRow,
    SearchResult,
    Stale,
)
from engram.tui.items import observation_item, session_item
from engram.tui.lazylist import CallSource, FixedSource, LazyList

SEARCH_HINT = "Type a few words or a question; results appear as you type."


@dataclass
class SearchSource:
    """One search's results: the first page comes with the keystroke, more as the list is
    scrolled towards its end (up to the cap)."""

    gateway: Gateway
    query: str
    project: str | None
    rows: list[ObservationRow]
    can_grow: bool
    in_memory = True

    def count(self) -> int:
        return len(self.rows)

    def fetch(self, offset: int, limit: int) -> list[ObservationRow]:
        return self.rows[offset : offset + limit]

    def grow(self) -> list[ObservationRow]:
        return self.gateway.search_more(self.query, self.project, len(self.rows) + SEARCH_PAGE)

    def adopt(self, rows: list[ObservationRow]) -> None:
        self.can_grow = len(rows) >= len(self.rows) + SEARCH_PAGE and len(rows) < SEARCH_CAP
        self.rows = rows


class ObservationListScreen(EngramScreen):
    """A screen whose list holds observations: Enter opens one, ``t`` shows its timeline."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.back", "Back"),
        Binding("t", "timeline", "Timeline"),
        Binding("r", "reload", "Reload", show=False),
    ]

    def list_widget(self) -> LazyList[ObservationRow]:
        return self.query_one(LazyList)

    async def on_lazy_list_selected(self, event: LazyList.Selected) -> None:
        from engram.tui.detail import ObservationScreen

        row: ObservationRow = event.item
        await self.engram.open(ObservationScreen(row.observation.id))

    async def action_timeline(self) -> None:
        from engram.tui.detail import TimelineScreen

        row = self.list_widget().current
        if row is not None:
            await self.engram.open(TimelineScreen(row.observation.id))

    def action_reload(self) -> None:
        self.refresh_data()


class RecentScreen(ObservationListScreen):
    TITLE_TEXT = "Recent observations"
    AUTO_FOCUS = "#recent-list"

    def compose_body(self) -> ComposeResult:
        yield LazyList(
            observation_item,
            title="Recent observations (newest first)",
            empty_text="No memories yet.",
            id="recent-list",
        )

    def refresh_data(self) -> None:
        gateway, project = self.engram.gateway, self.engram.project
        self.list_widget().set_source(
            CallSource(
                lambda: gateway.count_recent(project),
                lambda offset, limit: gateway.recent(project, offset, limit),
            ),
            keep_cursor=True,
        )


class SearchScreen(ObservationListScreen):
    TITLE_TEXT = "Search"
    AUTO_FOCUS = "#query"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.back", "Back"),
        Binding("q", "app.back", "Back", show=False),
        Binding("t", "timeline", "Timeline"),
        # Priority, so the move happens before the next key is read (an Enter typed right after
        # must open the first result); only while the search box has the focus.
        Binding("enter,down", "results", "Results", show=False, priority=True),
    ]

    def __init__(self, query: str = "") -> None:
        super().__init__()
        self._initial = query
        self.shown_query: str | None = None  # the query whose results are on screen

    def compose_body(self) -> ComposeResult:
        yield Input(
            self._initial,
            placeholder="Search memories: words or a question…",
            id="query",
        )
        yield LazyList(observation_item, title="Results", empty_text=SEARCH_HINT, id="results")

    def on_mount(self) -> None:
        self.list_widget().set_source(FixedSource([]))

    def refresh_data(self) -> None:
        self._search(self.query_one("#query", Input).value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._search(event.value)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "results":
            return self.focused is self.query_one("#query", Input)
        return True

    def action_results(self) -> None:
        if self.query_one("#query", Input).value.strip():
            # At once (Widget.focus defers): an Enter typed right after must reach the list.
            self.set_focus(self.list_widget())

    def _search(self, text: str) -> None:
        query = text.strip()
        results = self.list_widget()
        gateway = self.engram.gateway
        generation = gateway.next_search()
        if not query:
            self.shown_query = ""
            results.empty_text = SEARCH_HINT
            results.border_title = "Results"
            results.set_source(FixedSource([]))
            return
        results.border_subtitle = "searching…"
        project = self.engram.project
        self.run_db(
            lambda g: self._run_search(g, generation, query, project),
            self._show,
            group="search",
        )

    @staticmethod
    def _run_search(
        gateway: Gateway, generation: int, query: str, project: str | None
    ) -> SearchResult | None:
        try:
            return gateway.search(generation, query, project)
        except Stale:
            return None

    def _show(self, result: SearchResult | None) -> None:
        if result is None or result.generation != self.engram.gateway.current_search:
            return  # a newer keystroke is already being searched
        results = self.list_widget()
        results.border_title = f"Results for “{result.query}”"
        results.empty_text = (
            f"No memories match “{result.query}”.\n"
            "Try other words, fewer words, or switch project with p."
        )
        source = SearchSource(
            self.engram.gateway, result.query, self.engram.project, result.rows, result.more
        )
        results.set_source(source, keep_cursor=result.query == self.shown_query)
        self.shown_query = result.query

    def show_error(self, exc: EngramError) -> None:
        self.list_widget().border_subtitle = "search failed"
        super().show_error(exc)


class SessionsScreen(EngramScreen):
    TITLE_TEXT = "Sessions"
    AUTO_FOCUS = "#sessions-list"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.back", "Back"),
        Binding("r", "reload", "Reload", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        yield LazyList(
            session_item,
            title="Sessions (most recently active first)",
            empty_text="No sessions yet.",
            id="sessions-list",
        )

    def refresh_data(self) -> None:
        gateway, project = self.engram.gateway, self.engram.project
        self.query_one(LazyList).set_source(
            CallSource(
                lambda: gateway.count_sessions(project),
                lambda offset, limit: gateway.sessions(project, offset, limit),
            ),
            keep_cursor=True,
        )

    def action_reload(self) -> None:
        self.refresh_data()

    async def on_lazy_list_selected(self, event: LazyList.Selected) -> None:
        from engram.tui.detail import SessionScreen

        session: Session = event.item
        await self.engram.open(SessionScreen(session.id))

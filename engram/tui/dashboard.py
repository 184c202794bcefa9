"""The dashboard: counts of sessions, memories, prompts and projects, sync status, a menu, and
the most recent memories."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engram.errors import EngramError
from engram.terminal import for_terminal
from engram.tui.base import EngramScreen
from engram.tui.gateway import Dashboard, ObservationRow, SyncTarget
from engram.tui.items import observation_item
from engram.tui.lazylist import FixedSource, LazyList

MENU = [
    ("search", "s", "Search memories"),
    ("recent", "o", "Recent observations"),
    ("sessions", "e", "Sessions"),
    ("projects", "p", "Switch project"),
    ("help", "?", "Keys"),
]
EMPTY_RECENT = (
    "No memories yet.\n"
    "Agents save them with the mem_save tool; you can too:\n"
    '  engram save "Title" "**What**: … **Why**: …"'
)


class DashboardScreen(EngramScreen):
    TITLE_TEXT = "Dashboard"
    AUTO_FOCUS = "#menu"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.back", "Quit"),
        Binding("o", "recent", "Recent", priority=True),
        Binding("e", "sessions", "Sessions", priority=True),
        Binding("r", "reload", "Refresh", show=False),
        Binding("t", "timeline", "Timeline", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="stats"):
            for key, label in (
                ("observations", "Observations"),
                ("sessions", "Sessions"),
                ("prompts", "Prompts"),
                ("projects", "Projects"),
            ):
                yield Static(f"{label}\n…", id=f"stat-{key}", classes="stat")
        yield Static("Sync: …", id="sync")
        yield Static("", id="database")
        with Horizontal(id="dash-main"):
            menu = OptionList(
                *(Option(f"{key}  {label}", id=action) for action, key, label in MENU), id="menu"
            )
            menu.border_title = "Go to"
            yield menu
            yield LazyList(
                observation_item, title="Recent activity", empty_text=EMPTY_RECENT, id="recent"
            )

    def refresh_data(self) -> None:
        project = self.engram.project
        self.run_db(lambda g: g.dashboard(project), self._show, self._failed)
        self.run_db(lambda g: g.sync_targets(), self._show_sync, self._sync_failed, group="sync")

    def action_reload(self) -> None:
        self.refresh_data()

    def _show(self, data: Dashboard) -> None:
        stats = data.stats
        for key, label, value in (
            ("observations", "Observations", stats.total_observations),
            ("sessions", "Sessions", stats.total_sessions),
            ("prompts", "Prompts", stats.total_prompts),
            ("projects", "Projects", len(stats.projects)),
        ):
            self.query_one(f"#stat-{key}", Static).update(f"{label}\n{value:,}")
        self.query_one("#database", Static).update(Text(for_terminal(f"Database: {data.database}")))
        recent = self.query_one("#recent", LazyList)
        recent.set_source(FixedSource(data.recent), keep_cursor=True)

    def _failed(self, exc: EngramError) -> None:
        for key in ("observations", "sessions", "prompts", "projects"):
            self.query_one(f"#stat-{key}", Static).update(f"{key.capitalize()}\n—")
        self.query_one("#database", Static).update(
            Text(for_terminal(f"Cannot read the store: {exc}. Press r to retry."))
        )
        self.query_one("#recent", LazyList).show_error(str(exc))
        self.show_error(exc)

    def _show_sync(self, targets: list[SyncTarget]) -> None:
        if not targets:
            text = "Sync: not configured (memories stay on this machine; see engram sync)"
        else:
            parts = []
            for target in targets:
                if target.kind == "git":
                    parts.append(f"git {target.name}")
                elif not target.projects:
                    parts.append(f"cloud {target.name} — no project enrolled")
                else:
                    state = f"{target.pending:,} to push" if target.pending else "up to date"
                    parts.append(f"cloud {target.name} — {state} ({', '.join(target.projects)})")
            text = "Sync: " + " · ".join(parts)
        self.query_one("#sync", Static).update(Text(for_terminal(text)))

    def _sync_failed(self, exc: EngramError) -> None:
        self.query_one("#sync", Static).update(Text(for_terminal(f"Sync: unknown ({exc})")))

    # --- navigation -----------------------------------------------------------------------------

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        action = event.option.id
        if action in ("search", "projects", "help"):
            await self.app.run_action(action)
        elif action == "recent":
            await self.action_recent()
        elif action == "sessions":
            await self.action_sessions()

    async def action_recent(self) -> None:
        from engram.tui.lists import RecentScreen

        await self.engram.open(RecentScreen())

    async def action_sessions(self) -> None:
        from engram.tui.lists import SessionsScreen

        await self.engram.open(SessionsScreen())

    async def on_lazy_list_selected(self, event: LazyList.Selected) -> None:
        from engram.tui.detail import ObservationScreen

        row: ObservationRow = event.item
        await self.engram.open(ObservationScreen(row.observation.id))

    async def action_timeline(self) -> None:
        from engram.tui.detail import TimelineScreen

        recent = self.query_one("#recent", LazyList)
        if recent.has_focus and recent.current is not None:
            await self.engram.open(TimelineScreen(recent.current.observation.id))

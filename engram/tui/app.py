"""``EngramApp``: the Textual application behind ``engram tui`` — global keys, navigation between
screens, the project filter, the theme, and the notices for a locked database or a terminal too
small to draw in.

Textual writes text to the terminal as it is, escape sequences included: every text from the
store is passed through :func:`engram.terminal.for_terminal` where a screen shows it (lists in
``LazyList``, headers and dialogs in their screens, notifications here)."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widgets import Input

from engram.terminal import for_terminal
from engram.tui.gateway import Gateway
from engram.tui.styles import APP_CSS, DEFAULT_THEME, MIN_HEIGHT, MIN_WIDTH, light_theme

#: A database call running longer than this is reported as waiting for a lock.
WAIT_NOTICE_AFTER = 0.75


class EngramApp(App[None]):
    """Browse, search and tidy the local memory store from the keyboard."""

    TITLE = "Engram"
    CSS = APP_CSS
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c,ctrl+q", "quit", "Quit", priority=True, show=False),
        # Priority: handled as soon as the key arrives, so keys typed right after them land on
        # the new screen (Textual drops these while an Input has the focus, so they stay text).
        Binding("s,slash", "search", "Search", priority=True),
        Binding("p", "projects", "Project", priority=True),
        Binding("question_mark", "help", "Keys", priority=True),
    ]

    #: The project every screen is filtered to (``None`` = all projects).
    project: reactive[str | None] = reactive(None, init=False)
    #: A line shown on every screen while a database call waits (e.g. on another process's lock).
    db_notice: reactive[str] = reactive("", init=False)

    def __init__(
        self, gateway: Gateway, *, project: str | None = None, theme: str = DEFAULT_THEME
    ) -> None:
        super().__init__()
        self.gateway = gateway
        self.set_reactive(EngramApp.project, project or None)
        self.register_theme(light_theme())
        self.theme = theme

    def get_default_screen(self) -> Screen:
        from engram.tui.dashboard import DashboardScreen

        return DashboardScreen()

    def on_mount(self) -> None:
        self.set_interval(0.25, self._check_database_wait)
        self._check_size(self.size)

    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size)

    def _check_size(self, size: Size) -> None:
        self.set_class(size.width < MIN_WIDTH or size.height < MIN_HEIGHT, "-too-small")

    def _check_database_wait(self) -> None:
        waited = self.gateway.waiting_for()
        if waited >= WAIT_NOTICE_AFTER:
            self.db_notice = (
                f"Waiting for the database ({waited:.0f}s): another process may be holding a "
                f"lock on {self.gateway.database_path}"
            )
        else:
            self.db_notice = ""

    def on_unmount(self) -> None:
        self.gateway.close()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification (they quote titles, project names and errors) with control
        characters escaped."""
        super().notify(
            for_terminal(message),
            title=for_terminal(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    # --- global actions -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search", "projects", "help"):
            # Dialogs own the keyboard ("s" on a dialog's button must not open a search), and
            # in a text box these keys are text. (Textual usually drops such bindings itself
            # while an Input has the focus, but not for "/".)
            return not isinstance(self.screen, ModalScreen) and not isinstance(self.focused, Input)
        return True

    async def action_back(self) -> None:
        """Esc / q: back to the previous screen, or quit from the dashboard."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        else:
            self.exit()

    async def open(self, screen: Screen) -> None:
        """Show ``screen`` with its focus already set, so that keys typed right after the one
        that opened it reach it (Textual otherwise focuses a new screen a moment later)."""
        await self.push_screen(screen)
        if screen.AUTO_FOCUS:
            screen.set_focus(screen.query_one(screen.AUTO_FOCUS))

    async def action_search(self) -> None:
        from engram.tui.lists import SearchScreen

        if isinstance(self.screen, SearchScreen):
            self.screen.set_focus(self.screen.query_one("#query"))
        else:
            await self.open(SearchScreen())

    def action_projects(self) -> None:
        from engram.tui.dialogs import ProjectScreen

        def chosen(project: str | None) -> None:
            if project is not None:
                self.set_project(project or None)

        self.push_screen(ProjectScreen(self.project), chosen)

    def action_help(self) -> None:
        from engram.tui.dialogs import HelpScreen

        self.push_screen(HelpScreen())

    def set_project(self, project: str | None) -> None:
        if project == self.project:
            return
        self.project = project
        refresh = getattr(self.screen, "refresh_data", None)
        if refresh is not None:
            refresh()
        self.notify(f"Showing {project or 'all projects'}", timeout=3)

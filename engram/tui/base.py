"""What every screen of the TUI shares: the top bar, the "waiting for the database" line, the
footer of keys, the too-small notice, and running store calls off the UI thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from engram.errors import EngramError
from engram.terminal import for_terminal
from engram.tui.gateway import Closing, as_engram_error
from engram.tui.styles import MIN_HEIGHT, MIN_WIDTH

if TYPE_CHECKING:
    from engram.tui.app import EngramApp
    from engram.tui.gateway import Gateway

T = TypeVar("T")


def too_small_notice() -> Static:
    return Static(
        f"The terminal is too small for Engram.\nMake it at least {MIN_WIDTH}×{MIN_HEIGHT}.",
        id="too-small",
    )


def run_in_thread(
    node: Any,
    call: Callable[[Gateway], T],
    done: Callable[[T], object],
    failed: Callable[[EngramError], None],
    *,
    group: str = "db",
) -> None:
    """Run ``call(gateway)`` on a worker thread, then ``done(result)`` or ``failed(error)`` on
    the UI thread. Later calls of the same group supersede earlier ones."""
    app: EngramApp = node.app

    def work() -> None:
        try:
            result = call(app.gateway)
        except Closing:
            return
        except Exception as exc:
            outcome: tuple[Callable[[Any], object], Any] = (failed, as_engram_error(exc))
        else:
            outcome = (done, result)
        if get_current_worker().is_cancelled:
            return
        try:
            app.call_from_thread(*outcome)
        except RuntimeError:  # the app already stopped
            pass

    node.run_worker(work, thread=True, group=group, exclusive=True, exit_on_error=False)


class EngramScreen(Screen):
    """A full screen of the TUI; subclasses compose their body and load data in
    :meth:`refresh_data` (called whenever the screen becomes current)."""

    #: Shown in the top bar after "Engram ›".
    TITLE_TEXT: ClassVar[str] = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.back", "Back"),
    ]

    @property
    def engram(self) -> EngramApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="topbar")
        yield from self.compose_body()
        yield Static(id="status")
        yield Footer()
        yield too_small_notice()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.watch(self.app, "db_notice", self._show_db_notice)
        self.watch(self.app, "project", self._show_topbar)

    def _show_topbar(self, project: str | None = None) -> None:
        where = for_terminal(self.engram.project or "all projects")
        self.query_one("#topbar", Static).update(
            Text(f"Engram › {self.TITLE_TEXT}   ·   project: {where}")
        )

    def _show_db_notice(self, notice: str) -> None:
        status = self.query_one("#status", Static)
        status.update(Text(for_terminal(notice)))
        status.set_class(bool(notice), "-shown")

    def on_screen_resume(self) -> None:
        self._show_topbar()
        self.refresh_data()

    def refresh_data(self) -> None:
        """Load (or reload) what the screen shows."""

    def run_db(
        self,
        call: Callable[[Gateway], T],
        done: Callable[[T], object],
        failed: Callable[[EngramError], None] | None = None,
        *,
        group: str = "db",
    ) -> None:
        run_in_thread(self, call, done, failed or self.show_error, group=group)

    def show_error(self, exc: EngramError) -> None:
        self.notify(str(exc), title="Engram", severity="error", timeout=10)

"""Dialogs over the current screen: keys help, yes/no confirmation, editing a memory (title,
type, topic and content — the content in ``$VISUAL``/``$EDITOR``, or in the dialog's own text
area where there is none), showing a long text, and switching project."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from engram.errors import EngramError
from engram.store import Observation, ProjectInfo
from engram.terminal import for_terminal
from engram.text import plural
from engram.tui.base import run_in_thread, too_small_notice

KEYS = [
    ("Anywhere", ""),
    ("s  /", "search"),
    ("p", "switch project"),
    ("?", "this help"),
    ("Esc  q", "back (quit from the dashboard)"),
    ("Ctrl+C", "quit"),
    ("Lists", ""),
    ("j k  ↓ ↑", "move"),
    ("PgDn PgUp  Space b", "page"),
    ("g G  Home End", "first / last"),
    ("Enter", "open"),
    ("t", "timeline of the selected memory"),
    ("r", "refresh (lists, dashboard, memory)"),
    ("Dashboard", ""),
    ("o  e", "recent observations, sessions"),
    ("Memory", ""),
    ("j k", "scroll"),
    ("e  d  c", "edit, delete, copy (each asks first)"),
    ("E", "edit the content ($EDITOR, else in the edit dialog)"),
    ("h", "earlier versions"),
    ("t  o", "timeline, its session"),
    ("Edit dialog", ""),
    ("Tab", "next field (the content is last)"),
    ("Ctrl+E", "the content in $VISUAL / $EDITOR"),
    ("Ctrl+S  Esc", "save (asks first), cancel"),
    ("Search", ""),
    ("type", "results follow as you type"),
    ("↓  Enter", "go to the results"),
]

#: Types agents use; the edit dialog accepts any other word too.
KNOWN_TYPES = "bugfix decision architecture discovery pattern config learning manual"


class Dialog(ModalScreen):
    """A modal dialog; too small a terminal hides it behind the same notice as screens."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield from self.compose_dialog()
        yield too_small_notice()

    def compose_dialog(self) -> ComposeResult:
        yield from ()


class HelpScreen(Dialog):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def compose_dialog(self) -> ComposeResult:
        yield Static("Keys", classes="dialog-title")
        text = Text()
        for keys, meaning in KEYS:
            if not meaning:
                text.append(f"{keys}\n", style="bold underline")
            else:
                text.append(f"  {keys:<20}", style="bold")
                text.append(f"{meaning}\n")
        text.rstrip()
        with VerticalScroll(id="help-keys"):
            yield Static(text)
        yield Static("Esc closes this help.", classes="field-label")


class MessageScreen(Dialog):
    """A long text (a prompt) in a scrollable box."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose_dialog(self) -> ComposeResult:
        yield Static(Text(for_terminal(self.title_text)), classes="dialog-title")
        with VerticalScroll():
            yield Static(Text(for_terminal(self.text)))


class ConfirmScreen(Dialog):
    """Ask before doing something; dismisses with ``True`` (y / Enter on the button) or
    ``False`` (n / Esc)."""

    #: The safe answer has the focus, so a stray Enter never deletes anything.
    AUTO_FOCUS = "#no"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    def __init__(self, title: str, question: str, *, yes: str = "Yes", danger: bool = False):
        super().__init__()
        self.title_text = title
        self.question = question
        self.yes = yes
        self.danger = danger

    def compose_dialog(self) -> ComposeResult:
        yield Static(Text(for_terminal(self.title_text)), classes="dialog-title")
        yield Static(Text(for_terminal(self.question)), classes="dialog-text")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Cancel (n)", id="no")
            yield Button(f"{self.yes} (y)", id="yes", variant="error" if self.danger else "primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


def describe_changes(obs: Observation, changes: dict[str, str]) -> str:
    names = {"title": "title", "type": "type", "topic_key": "topic"}
    lines = []
    for field, new in changes.items():
        old = getattr(obs, field) or ""
        if field == "content":
            lines.append(
                f"  content: {plural(len(old.splitlines()), 'line')}, {len(old):,} characters → "
                f"{plural(len(new.splitlines()), 'line')}, {len(new):,} characters"
            )
            continue
        lines.append(
            f"  {names[field]}: “{old}” → “{new}”" if new else f"  {names[field]}: cleared"
        )
    return "\n".join(lines)


def external_editor() -> list[str] | None:
    """The user's editor command (``$VISUAL``, else ``$EDITOR``), split like a shell would."""
    from engram.settings import editor_command

    return editor_command()


class EditorUnavailable(Exception):
    """The external editor cannot be used here (none set, no terminal to hand over, failed)."""


def edit_in_editor(app: object, text: str, command: list[str]) -> str:
    """Hand the terminal to ``command`` on a private temp file holding ``text`` and return
    what it holds when the editor exits; :class:`EditorUnavailable` when that cannot be done
    (the caller keeps the in-app editor)."""
    from textual.app import SuspendNotSupported

    handle, name = tempfile.mkstemp(prefix="engram-memory-", suffix=".md")  # 0600
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            with app.suspend():  # type: ignore[attr-defined]
                done = subprocess.run([*command, str(path)], check=False)
        except SuspendNotSupported:
            raise EditorUnavailable("this terminal cannot be handed to an editor") from None
        except OSError as exc:
            raise EditorUnavailable(f"cannot start {command[0]}: {exc.strerror or exc}") from None
        if done.returncode != 0:
            raise EditorUnavailable(f"{command[0]} exited with status {done.returncode}")
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


class EditScreen(Dialog):
    """Edit title, type, topic and content; dismisses with the changed fields (or ``None``).

    The boxes never select their text on focus: a keypress adds to the title, it does not
    replace it. ``content_first`` opens with the content focused (or, with ``$EDITOR`` set,
    in the editor at once)."""

    AUTO_FOCUS = "#edit-title"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+e", "external_editor", "Content in $EDITOR"),
    ]

    def __init__(self, observation: Observation, *, content_first: bool = False) -> None:
        super().__init__()
        self.observation = observation
        self.content_first = content_first

    def compose_dialog(self) -> ComposeResult:
        obs = self.observation
        yield Static(f"Edit #{obs.id}", classes="dialog-title")
        yield Label("Title", classes="field-label")
        current = self.current()
        yield Input(current["title"], id="edit-title", select_on_focus=False)
        yield Label(f"Type (e.g. {KNOWN_TYPES})", classes="field-label")
        yield Input(current["type"], id="edit-type", select_on_focus=False)
        yield Label("Topic key (empty = none)", classes="field-label")
        yield Input(
            current["topic_key"],
            id="edit-topic",
            placeholder="e.g. architecture/auth",
            select_on_focus=False,
        )
        editor = external_editor()
        hint = f"Ctrl+E: in {editor[0]}" if editor else "set $EDITOR to use your editor"
        yield Label(f"Content ({hint})", classes="field-label")
        yield TextArea(current["content"], id="edit-content", soft_wrap=True, tab_behavior="focus")
        # Problems show above the buttons, never pushed out of sight by a long content box.
        yield Static("", id="edit-error", classes="dialog-text")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Cancel (Esc)", id="cancel")
            yield Button("Save (Ctrl+S)", id="save", variant="primary")

    def current(self) -> dict[str, str]:
        """The fields as the boxes first show them: control characters escaped, so that a
        field the user leaves alone is never written back (escaped) into the store."""
        obs = self.observation
        return {
            "title": for_terminal(obs.title),
            "type": for_terminal(obs.type),
            "topic_key": for_terminal(obs.topic_key or ""),
            "content": for_terminal(obs.content),
        }

    def on_mount(self) -> None:
        for box in self.query(Input):
            box.cursor_position = len(box.value)  # at the end of what is there
        area = self.query_one("#edit-content", TextArea)
        area.move_cursor(area.document.end)  # adding to a memory is the usual edit
        if self.content_first:
            area.focus()
            if external_editor():
                self.call_after_refresh(self.action_external_editor)

    def changes(self) -> dict[str, str]:
        values = {
            "title": self.query_one("#edit-title", Input).value.strip(),
            "type": self.query_one("#edit-type", Input).value.strip(),
            "topic_key": self.query_one("#edit-topic", Input).value.strip(),
            "content": self.query_one("#edit-content", TextArea).text.strip(),
        }
        current = self.current()
        return {k: v for k, v in values.items() if v != current[k].strip()}

    def action_external_editor(self) -> None:
        """The content in ``$VISUAL``/``$EDITOR``; what it saves comes back into the box."""
        command = external_editor()
        area = self.query_one("#edit-content", TextArea)
        if command is None:
            self.notify("No $EDITOR (or $VISUAL) is set: edit the content here.", timeout=5)
            area.focus()
            return
        try:
            text = edit_in_editor(self.app, area.text, command)
        except EditorUnavailable as exc:
            self.notify(f"{exc}: edit the content here.", severity="warning", timeout=6)
            area.focus()
            return
        area.load_text(text.rstrip("\n"))
        area.focus()

    def action_save(self) -> None:
        changes = self.changes()
        error = self.query_one("#edit-error", Static)
        if "title" in changes and not changes["title"]:
            error.update("The title cannot be empty.")
            return
        if "type" in changes and not changes["type"]:
            error.update("The type cannot be empty.")
            return
        if "content" in changes and not changes["content"]:
            error.update("The content cannot be empty.")
            return
        if not changes:
            self.notify("Nothing changed.", timeout=3)
            self.dismiss(None)
            return
        self.dismiss(changes)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_cancel()


ALL_PROJECTS = "\x00all"


class ProjectScreen(Dialog):
    """Pick the project every screen shows; dismisses with its name, ``""`` for all projects,
    or ``None`` when cancelled. Typing filters the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Cancel"),
        Binding("down", "to_list", "List", show=False),
    ]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current
        self.projects: list[ProjectInfo] = []

    def compose_dialog(self) -> ComposeResult:
        yield Static("Switch project", classes="dialog-title")
        yield Input(placeholder="Filter projects…", id="projects-filter")
        yield OptionList(Option("Loading projects…", disabled=True), id="projects-list")

    AUTO_FOCUS = "#projects-filter"

    def on_mount(self) -> None:
        run_in_thread(self, lambda g: g.projects(), self._loaded, self._failed, group="projects")

    def _loaded(self, projects: list[ProjectInfo]) -> None:
        self.projects = projects
        self._fill("")

    def _failed(self, exc: EngramError) -> None:
        options = self.query_one("#projects-list", OptionList)
        options.clear_options()
        options.add_option(
            Option(Text(for_terminal(f"Cannot list projects: {exc}")), disabled=True)
        )

    def _fill(self, text: str) -> None:
        needle = text.strip().lower()
        options = self.query_one("#projects-list", OptionList)
        options.clear_options()
        marker = "● " if self.current is None else "  "
        if not needle:
            options.add_option(Option(f"{marker}All projects", id=ALL_PROJECTS))
        for info in self.projects:
            if needle and needle not in info.name.lower():
                continue
            mark = "● " if info.name == self.current else "  "
            label = Text(f"{mark}{for_terminal(info.name)}")
            label.append(
                f"   {plural(info.observation_count, 'memory')} · "
                f"{plural(info.session_count, 'session')}",
                style="dim",
            )
            options.add_option(Option(label, id=info.name))
        if not options.option_count:
            shown = for_terminal(text.strip())
            options.add_option(Option(Text(f"No project matches “{shown}”"), disabled=True))
        options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.projects:
            self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one("#projects-list", OptionList)
        if options.highlighted is not None:
            options.action_select()

    def action_to_list(self) -> None:
        self.set_focus(self.query_one("#projects-list", OptionList))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        chosen = event.option.id
        if chosen is not None:
            self.dismiss("" if chosen == ALL_PROJECTS else chosen)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

"""Detail screens: one observation (its What / Why / Where / Learned blocks, and the actions on
it), the timeline around an observation, and one session with its observations and prompts.

An observation may be deleted by another process while it is on screen: every refresh and every
action fetches it again first, and a memory that is gone is reported as such, never acted on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from engram.errors import EngramError, NotFoundError
from engram.store import Observation, Prompt, Session, Timeline
from engram.store.models import TimelineEntry
from engram.terminal import for_terminal
from engram.text import plural, split_blocks
from engram.tui.base import EngramScreen
from engram.tui.gateway import ObservationRow
from engram.tui.items import ACTIVE, observation_item, prompt_item, timeline_item
from engram.tui.lazylist import CallSource, FixedSource, LazyList
from engram.tui.lists import ObservationListScreen

TIMELINE_BEFORE = 10
TIMELINE_AFTER = 10


def gone_text(observation_id: int) -> str:
    return (
        f"Memory #{observation_id} no longer exists: it was deleted (perhaps by another "
        "process or a sync) while it was on screen. Nothing was changed. Press Esc to go back."
    )


def relations_text(row: ObservationRow) -> Text:
    """The memory's review state and its relations, one line each (``supersedes #12 (…)``);
    empty when it has none."""
    found = row.relations
    text = Text()
    if found is None or (not found.relations and not found.needs_review):
        return text
    if found.needs_review:
        text.append("needs review: a pending conflict\n", style="bold")
    for rel in found.relations:
        line = for_terminal(rel.note(found.sync_id))
        text.append(f"↳ {line}  ", style="" if rel.active else "dim")
        text.append(f"{rel.sync_id}\n", style="dim")
    text.rstrip()
    return text


class ObservationScreen(EngramScreen):
    """One memory in full, scrollable; edit, delete, copy, timeline."""

    TITLE_TEXT = "Memory"
    AUTO_FOCUS = "#obs-body"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.back", "Back"),
        Binding("t", "timeline", "Timeline"),
        Binding("e", "edit", "Edit"),
        Binding("E", "edit_content", "Edit content", show=False),
        Binding("h", "history", "History"),
        Binding("d", "delete", "Delete"),
        Binding("c", "copy", "Copy"),
        Binding("asterisk", "pin", "Pin"),
        Binding("o", "session", "Session"),
        Binding("r", "reload", "Refresh"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, observation_id: int) -> None:
        super().__init__()
        self.observation_id = observation_id
        self.observation: Observation | None = None
        self.gone = False

    def compose_body(self) -> ComposeResult:
        yield Static(f"#{self.observation_id}", id="obs-head")
        yield Static("Loading…", id="obs-meta")
        yield Static("", id="obs-relations")
        yield Static(gone_text(self.observation_id), id="obs-gone")
        yield VerticalScroll(id="obs-body")

    def refresh_data(self) -> None:
        self._fetch(self._show)

    def action_reload(self) -> None:
        self.refresh_data()

    def _fetch(self, then: Callable[[ObservationRow], object]) -> None:
        """Fetch the memory again, then ``then(row)`` — or report that it is gone."""
        oid = self.observation_id
        first = self.observation is None  # opening it is a read (docs/importance.md)
        self.run_db(
            lambda g: g.observation(oid, record_access=first), then, self._failed,
            group="observation",
        )  # fmt: skip

    def _failed(self, exc: EngramError) -> None:
        if isinstance(exc, NotFoundError):
            self._mark_gone()
        else:
            self.show_error(exc)

    def _mark_gone(self) -> None:
        self.gone = True
        self.add_class("-gone")
        self.query_one("#obs-meta", Static).update("")
        self.query_one("#obs-relations", Static).update("")
        self.notify(gone_text(self.observation_id), severity="warning", timeout=8)

    def _show(self, row: ObservationRow) -> None:
        obs = row.observation
        self.gone = False
        self.remove_class("-gone")
        head = Text()
        head.append(f"#{obs.id}  ")
        head.append(for_terminal(obs.type), style="italic")
        if row.active:
            head.append(f"  {ACTIVE}")
        if obs.pinned:
            head.append("  📌 pinned", style="bold")
        head.append(f"\n{for_terminal(obs.title)}")
        self.query_one("#obs-head", Static).update(head)
        meta = [
            f"project {obs.project or '—'}",
            f"scope {obs.scope}",
            f"session {obs.session_id}",
        ]
        if obs.topic_key:
            meta.append(f"topic {obs.topic_key}")
        if obs.tool_name:
            meta.append(f"tool {obs.tool_name}")
        meta += [
            f"created {obs.created_at}",
            f"updated {obs.updated_at}",
            f"revisions {obs.revision_count} (h: earlier versions)",
            f"duplicates {obs.duplicate_count}",
            f"importance {obs.importance:.2f}"
            + (" (set by hand)" if obs.importance_override is not None else ""),
            f"read {obs.access_count}×",
        ]
        if obs.valid_to:
            meta.append(f"valid until {obs.valid_to}")
        self.query_one("#obs-meta", Static).update(Text(for_terminal(" · ".join(meta))))
        self.query_one("#obs-relations", Static).update(relations_text(row))
        if self.observation is None or self.observation.content != obs.content:
            body = self.query_one("#obs-body", VerticalScroll)
            body.remove_children()
            body.mount_all(self._blocks(obs.content))
        self.observation = obs

    @staticmethod
    def _blocks(content: str) -> list[Vertical]:
        widgets = []
        for block in split_blocks(content) or []:
            parts = []
            if block.label:
                parts.append(Static(Text(for_terminal(block.label)), classes="block-label"))
            parts.append(Static(Text(for_terminal(block.text)), classes="block-text"))
            widgets.append(Vertical(*parts, classes="block"))
        return widgets

    def action_scroll(self, lines: int) -> None:
        self.query_one("#obs-body", VerticalScroll).scroll_relative(y=lines, animate=False)

    # --- actions: each starts by fetching the memory again ---------------------------------

    def action_timeline(self) -> None:
        self._fetch(lambda row: self.app.push_screen(TimelineScreen(row.observation.id)))

    def action_session(self) -> None:
        self._fetch(lambda row: self.app.push_screen(SessionScreen(row.observation.session_id)))

    def action_copy(self) -> None:
        from engram.tui.dialogs import ConfirmScreen

        def ask(row: ObservationRow) -> None:
            obs = row.observation
            self._show(row)

            def answer(yes: bool | None) -> None:
                if yes:
                    self.app.copy_to_clipboard(obs.content)
                    self.notify(
                        f"Copied the content of #{obs.id} ({len(obs.content):,} characters). "
                        "Your terminal passes it to the clipboard if it supports OSC 52.",
                        timeout=5,
                    )

            self.app.push_screen(
                ConfirmScreen(
                    "Copy to clipboard",
                    f"Copy the content of #{obs.id} “{obs.title}” "
                    f"({len(obs.content):,} characters) to the clipboard?",
                    yes="Copy",
                ),
                answer,
            )

        self._fetch(ask)

    def action_pin(self) -> None:
        """Pin or unpin (a pin syncs with the memory; pinned memories are never archived)."""

        def toggle(row: ObservationRow) -> None:
            obs = row.observation
            self.run_db(
                lambda g: g.pin(obs.id, not obs.pinned), self._pinned, self._failed, group="write"
            )

        self._fetch(toggle)

    def _pinned(self, obs: Observation) -> None:
        what = "Pinned" if obs.pinned else "Unpinned"
        self.notify(f"{what} #{obs.id} “{obs.title}”.", timeout=4)
        self.refresh_data()

    def action_delete(self) -> None:
        from engram.tui.dialogs import ConfirmScreen

        def ask(row: ObservationRow) -> None:
            obs = row.observation
            self._show(row)

            def answer(yes: bool | None) -> None:
                if yes:
                    self.run_db(
                        lambda g: g.delete(obs.id), self._deleted, self._failed, group="write"
                    )

            self.app.push_screen(
                ConfirmScreen(
                    "Delete memory",
                    f"Delete #{obs.id} “{obs.title}”?\n"
                    "It disappears from lists and search here and, through sync, on other "
                    "machines. This is a soft delete: the row stays in the database.",
                    yes="Delete",
                    danger=True,
                ),
                answer,
            )

        self._fetch(ask)

    def _deleted(self, obs: Observation) -> None:
        self.notify(f"Deleted #{obs.id} “{obs.title}”.", timeout=5)
        if self.is_current:
            self.app.pop_screen()

    def action_history(self) -> None:
        """The memory's earlier versions (kept on this machine), newest first."""
        from engram import formatting
        from engram.tui.dialogs import MessageScreen

        oid = self.observation_id
        self.run_db(
            lambda g: g.history(oid),
            lambda found: self.app.push_screen(
                MessageScreen(f"Versions of #{oid}", formatting.history(found))
            ),
            self._failed,
            group="observation",
        )

    def action_edit_content(self) -> None:
        self.action_edit(content_first=True)

    def action_edit(self, content_first: bool = False) -> None:
        from engram.tui.dialogs import ConfirmScreen, EditScreen, describe_changes

        def edit(row: ObservationRow) -> None:
            obs = row.observation
            self._show(row)

            def edited(changes: dict[str, str] | None) -> None:
                if not changes:
                    return

                def answer(yes: bool | None) -> None:
                    if yes:
                        self.run_db(
                            lambda g: g.update(obs.id, **changes),
                            self._saved,
                            self._failed,
                            group="write",
                        )

                self.app.push_screen(
                    ConfirmScreen(
                        "Save changes",
                        f"Save these changes to #{obs.id}?\n{describe_changes(obs, changes)}",
                        yes="Save",
                    ),
                    answer,
                )

            self.app.push_screen(EditScreen(obs, content_first=content_first), edited)

        self._fetch(edit)

    def _saved(self, obs: Observation) -> None:
        self.notify(f"Saved #{obs.id}.", timeout=4)
        self.refresh_data()


class TimelineScreen(ObservationListScreen):
    """The memories saved just before and after one, in its session, in order."""

    TITLE_TEXT = "Timeline"
    AUTO_FOCUS = "#timeline"

    def __init__(self, observation_id: int) -> None:
        super().__init__()
        self.observation_id = observation_id

    def compose_body(self) -> ComposeResult:
        yield Static("Loading…", id="tl-head")
        yield LazyList(self._item, title=f"Around #{self.observation_id}", id="timeline")

    def _item(self, entry: TimelineEntry):
        return timeline_item(entry, self.observation_id)

    def entries(self) -> LazyList[TimelineEntry]:
        """The list, typed as what it holds here (timeline entries, not observation rows)."""
        return self.query_one("#timeline", LazyList)

    def refresh_data(self) -> None:
        oid = self.observation_id
        self.run_db(
            lambda g: g.timeline(oid, TIMELINE_BEFORE, TIMELINE_AFTER), self._show, self._failed
        )

    def _show(self, timeline: Timeline) -> None:
        focus = timeline.focus
        entry = TimelineEntry.of(focus, is_focus=True)
        entries = [*timeline.before, entry, *timeline.after]
        session = timeline.session_info
        if session is None:
            head = f"Session {focus.session_id} (not recorded on this machine)"
        else:
            head = f"Session {session.id} · {session.project or 'no project'} · started {session.started_at}"
            head += f" · {ACTIVE}" if session.active else f" · ended {session.ended_at}"
        head += (
            f"\n{plural(timeline.total_in_range, 'memory')} in this session; "
            f"showing up to {TIMELINE_BEFORE} before and {TIMELINE_AFTER} after #{focus.id}."
        )
        self.query_one("#tl-head", Static).update(Text(for_terminal(head)))
        self.entries().set_source(FixedSource(entries), cursor=len(timeline.before))

    def _failed(self, exc: EngramError) -> None:
        if isinstance(exc, NotFoundError):
            self.query_one("#tl-head", Static).update(gone_text(self.observation_id))
            self.entries().set_source(FixedSource([]))
            self.entries().empty_text = "This memory was deleted."
        else:
            self.show_error(exc)

    async def on_lazy_list_selected(self, event: LazyList.Selected) -> None:
        event.prevent_default()  # timeline entries are not observation rows
        entry: TimelineEntry = event.item
        await self.engram.open(ObservationScreen(entry.id))

    async def action_timeline(self) -> None:
        entry = self.entries().current
        if entry is not None and entry.id != self.observation_id:
            await self.engram.open(TimelineScreen(entry.id))


class SessionScreen(ObservationListScreen):
    """One session: what it was, its observations and its prompts (Tab switches lists)."""

    TITLE_TEXT = "Session"
    AUTO_FOCUS = "#session-observations"

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id

    def compose_body(self) -> ComposeResult:
        yield Static("Loading…", id="session-head")
        yield LazyList(
            observation_item,
            title="Observations",
            empty_text="No memories in this session.",
            id="session-observations",
        )
        prompts = LazyList(
            prompt_item, title="Prompts", empty_text="No prompts saved.", id="session-prompts"
        )
        prompts.styles.height = "1fr"
        yield prompts

    def list_widget(self) -> LazyList[ObservationRow]:
        return self.query_one("#session-observations", LazyList)

    def refresh_data(self) -> None:
        sid = self.session_id
        self.run_db(lambda g: g.session(sid), self._show, self._failed)

    def _show(self, data: tuple[Session, int, int]) -> None:
        session, observations, prompts = data
        head = f"{session.id} · {session.project or 'no project'}"
        if session.directory:
            head += f" · {session.directory}"
        head += f"\nstarted {session.started_at} · "
        head += ACTIVE if session.active else f"ended {session.ended_at}"
        head += f" · {plural(observations, 'memory')} · {plural(prompts, 'prompt')}"
        if session.summary:
            head += f"\n{session.summary}"
        self.query_one("#session-head", Static).update(Text(for_terminal(head)))
        gateway, sid = self.engram.gateway, self.session_id
        self.list_widget().set_source(
            CallSource(
                lambda: gateway.call(lambda s: s.session_counts(sid)[0]),
                lambda offset, limit: gateway.session_observations(sid, offset, limit),
            ),
            keep_cursor=True,
        )
        self.query_one("#session-prompts", LazyList).set_source(
            CallSource(
                lambda: gateway.call(lambda s: s.session_counts(sid)[1]),
                lambda offset, limit: gateway.session_prompts(sid, offset, limit),
            ),
            keep_cursor=True,
        )

    def _failed(self, exc: EngramError) -> None:
        if isinstance(exc, NotFoundError):
            self.query_one("#session-head", Static).update(
                Text(for_terminal(f"Session {self.session_id} no longer exists on this machine."))
            )
        else:
            self.show_error(exc)

    async def on_lazy_list_selected(self, event: LazyList.Selected) -> None:
        # Observation rows fall through to ObservationListScreen's handler (Textual calls the
        # handlers of every class in the MRO unless one prevents the default).
        if event.control.id == "session-prompts":
            from engram.tui.dialogs import MessageScreen

            event.prevent_default()
            prompt: Prompt = event.item
            self.app.push_screen(MessageScreen(f"Prompt #{prompt.id}", prompt.content))

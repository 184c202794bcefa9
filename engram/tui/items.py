"""How each kind of entry reads as a two-line list item: a headline (id, type, badge, title)
and a preview line (project, time, the start of the content).

Each line is a list of ``(text, role)`` spans; the list widget colours roles from the theme, so
these functions hold no colours and are tested as plain text.
"""

from __future__ import annotations

from engram.formatting import VIA_CONTEXT, match_line
from engram.store import Prompt, Session
from engram.store.models import TimelineEntry
from engram.text import one_line
from engram.tui.gateway import ObservationRow
from engram.tui.lazylist import Line
from engram.tui.present import short_time

ACTIVE = "● active"


def observation_item(row: ObservationRow) -> tuple[Line, Line]:
    """A memory; a search result also says why it matched (the store's ``match``)."""
    obs = row.observation
    head: list[tuple[str, str]] = [(f"#{obs.id}", "id"), (" ", ""), (obs.type, "type"), (" ", "")]
    if row.active:
        head += [(ACTIVE, "badge"), (" ", "")]
    if obs.match is not None and obs.match.via_context:
        head += [(VIA_CONTEXT, "badge"), (" ", "")]
    head.append((one_line(obs.title, 200), "title"))
    where = " · ".join(p for p in (obs.project, short_time(obs.created_at)) if p)
    preview: list[tuple[str, str]] = [(where, "meta"), ("  ", "")]
    if obs.match is not None and not obs.match.via_context:
        preview += [(match_line(obs.match), "badge"), ("  ", "")]
    preview.append((one_line(obs.content), "preview"))
    return head, preview


def session_item(session: Session) -> tuple[Line, Line]:
    head: list[tuple[str, str]] = [(session.id, "title"), (" ", "")]
    if session.active:
        head += [(ACTIVE, "badge"), (" ", "")]
    count = session.observation_count or 0
    head += [
        (session.project or "(no project)", "type"),
        (" ", ""),
        (f"{count:,} memor{'y' if count == 1 else 'ies'}", "meta"),
    ]
    times = f"started {short_time(session.started_at)}"
    if session.ended_at:
        times += f" · ended {short_time(session.ended_at)}"
    second: list[tuple[str, str]] = [(times, "meta")]
    if session.directory:
        second += [(" · ", "meta"), (session.directory, "meta")]
    if session.summary:
        second += [("  ", ""), (one_line(session.summary), "preview")]
    return head, second


def prompt_item(prompt: Prompt) -> tuple[Line, Line]:
    head: list[tuple[str, str]] = [
        (f"#{prompt.id}", "id"),
        (" ", ""),
        (one_line(prompt.content), "title"),
    ]
    return head, [(short_time(prompt.created_at), "meta")]


def timeline_item(entry: TimelineEntry, focus_id: int) -> tuple[Line, Line]:
    head: list[tuple[str, str]] = [
        (f"#{entry.id}", "id"),
        (" ", ""),
        (entry.type, "type"),
        (" ", ""),
    ]
    if entry.id == focus_id:
        head += [("◆ this memory", "badge"), (" ", "")]
    head.append((one_line(entry.title, 200), "title"))
    preview: list[tuple[str, str]] = [
        (short_time(entry.created_at), "meta"),
        ("  ", ""),
        (one_line(entry.content), "preview"),
    ]
    return head, preview

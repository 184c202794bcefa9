"""Search results in the TUI say why they matched (issue 14): matched words on the preview
line, and a "via session context" badge for memories found only through their session."""

from __future__ import annotations

from engram.store.models import NO_INTENT, Observation, SearchMatch
from engram.tui.gateway import ObservationRow
from engram.tui.items import observation_item


def _observation(match: SearchMatch | None) -> Observation:
    return Observation(
        id=12, sync_id="obs-1", session_id="s-1", type="bugfix", title="Fixed it",
        content="What: the fix", tool_name=None, project="acme", scope="project", topic_key=None,
        revision_count=1, duplicate_count=1, last_seen_at=None,
        created_at="2026-11-21 10:05:33", updated_at="2026-11-21 10:05:33", deleted_at=None,
        **NO_INTENT, match=match,
    )  # fmt: skip


def plain(lines) -> str:
    return "\n".join("".join(text for text, _ in line) for line in lines)


def test_search_results_show_their_match() -> None:
    words = SearchMatch("words", ["login"], ["postgres"], [])
    assert plain(observation_item(ObservationRow(_observation(words), active=False))) == (
        "#12 bugfix Fixed it\n"
        "acme · 2026-11-21 10:05  matched: login, postgres (prefix)  What: the fix"
    )
    context = SearchMatch("context", [], [], ["login"])
    assert plain(observation_item(ObservationRow(_observation(context), active=False))) == (
        "#12 bugfix via session context Fixed it\nacme · 2026-11-21 10:05  What: the fix"
    )
    # Lists that are not search results look as before.
    assert plain(observation_item(ObservationRow(_observation(None), active=False))) == (
        "#12 bugfix Fixed it\nacme · 2026-11-21 10:05  What: the fix"
    )

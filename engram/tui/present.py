"""Pure presentation rules of the TUI: how list positions read ("21–40 of 312") and short
times. (How a memory splits into What / Why / Where / Learned blocks is in ``engram.text``,
shared with the dashboard.)

No Textual here, so these rules are unit-tested without an app.
"""

from __future__ import annotations


def position_text(first: int, last: int, total: int | None) -> str:
    """ "21–40 of 312" for items ``first``..``last`` (1-based) of ``total``."""
    if total is None:
        return "loading…"
    if total == 0:
        return "0 of 0"
    first = max(1, min(first, total))
    last = max(first, min(last, total))
    return f"{first:,}–{last:,} of {total:,}"


def short_time(stamp: str | None) -> str:
    """``2026-11-21 10:05`` from the store's ``2026-11-21 10:05:33`` (UTC)."""
    return (stamp or "")[:16]

"""Pure presentation rules of the TUI: how a memory's content splits into its What / Why /
Where / Learned blocks, how list positions read ("21–40 of 312"), and one-line previews.

No Textual here, so these rules are unit-tested without an app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The labels agents are taught to structure a memory with, in their usual order.
BLOCK_LABELS = ("What", "Why", "Where", "Learned")

# "**What**: …", "What: …", "## What", "- **Why** — …" (any case); the rest of the line, if any,
# starts the block's text.
_LABEL_LINE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?P<label>what|why|where|learned)\s*"
    r"(?:\*\*|__)?\s*(?:[:\-—–]\s*(?:\*\*|__)?|(?:\*\*|__)?\s*$)(?P<rest>.*)$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Block:
    """One labelled part of a memory (``label`` is ``""`` for text before the first label)."""

    label: str
    text: str


def split_blocks(content: str) -> list[Block]:
    """Split ``content`` into labelled blocks; text without labels is one unlabelled block.

    Only lines that *start* with a label count, so a sentence mentioning "why" stays text.
    """
    blocks: list[Block] = []
    label = ""
    lines: list[str] = []

    def close() -> None:
        text = "\n".join(lines).strip("\n")
        if label or text.strip():
            blocks.append(Block(label, text.rstrip()))

    for line in content.splitlines():
        match = _LABEL_LINE.match(line)
        if match:
            close()
            label = match.group("label").capitalize()
            rest = match.group("rest").strip()
            lines = [rest] if rest else []
        else:
            lines.append(line)
    close()
    return blocks


def position_text(first: int, last: int, total: int | None) -> str:
    """ "21–40 of 312" for items ``first``..``last`` (1-based) of ``total``."""
    if total is None:
        return "loading…"
    if total == 0:
        return "0 of 0"
    first = max(1, min(first, total))
    last = max(first, min(last, total))
    return f"{first:,}–{last:,} of {total:,}"


_EMPHASIS = re.compile(r"\*\*|__")


def one_line(text: str, limit: int = 400) -> str:
    """Whitespace collapsed to single spaces and Markdown bold markers dropped, cut to
    ``limit`` characters (for previews)."""
    flat = " ".join(_EMPHASIS.sub("", text[: limit * 4]).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_time(stamp: str | None) -> str:
    """``2026-11-21 10:05`` from the store's ``2026-11-21 10:05:33`` (UTC)."""
    return (stamp or "")[:16]

"""Merging a group of near-duplicate memories into one (deterministic; docs/importance.md).

The newest source (by last change, then key) is the base: its title, type, topic and text are
kept whole. Every other source adds the sentences it says that the merged text does not say yet
(a sentence counts as said when 80 % of its words, and every word holding a digit — a number, a
version, a port — already appear in one kept sentence), under a line naming where they came
from — so no distinct fact is lost, and two machines merging the same memories write the same
text under the same key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engram.consolidate.similarity import words

#: Share of a sentence's words that one kept sentence must hold for it to be "said already".
COVERED = 0.8
_LABEL = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\*\*[^*\n]{1,40}\*\*:?|#+)\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


@dataclass(frozen=True, slots=True)
class Source:
    """One memory being merged, as of the plan."""

    key: str
    title: str
    content: str
    type: str
    topic_key: str | None
    tool_name: str | None
    session_id: str
    created_at: str
    updated_at: str
    valid_from: str | None
    duplicate_count: int
    importance_override: float | None


@dataclass(frozen=True, slots=True)
class Merged:
    """The memory a group becomes."""

    key: str
    title: str
    content: str
    type: str
    topic_key: str | None
    tool_name: str | None
    session_id: str
    duplicate_count: int
    importance_override: float | None
    sources: tuple[str, ...]  # keys, base first


def merged_key(project: str, keys: Sequence[str]) -> str:
    """The merged memory's sync id: from its project and its sources' keys (any order)."""
    material = "\0".join(["merge", project, *sorted(set(keys))])
    return "obs-" + hashlib.sha256(material.encode()).hexdigest()[:16]


def ordered(sources: Sequence[Source]) -> list[Source]:
    """Base first: the most recently changed source, ties broken by key."""
    by_key = sorted(sources, key=lambda s: s.key)
    return sorted(by_key, key=lambda s: s.updated_at, reverse=True)


def facts(text: str) -> list[str]:
    """The sentences of ``text``: its lines, each split at sentence ends."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            out += [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
    return out


def _bag(fact: str) -> frozenset[str]:
    return frozenset(words(_LABEL.sub("", fact)))


def _said(fact: frozenset[str], kept: frozenset[str]) -> bool:
    """Whether the kept sentence ``kept`` already says ``fact``."""
    if any(any(c.isdigit() for c in word) and word not in kept for word in fact):
        return False  # another number is another fact
    return len(fact & kept) >= COVERED * len(fact)


def merge(project: str, sources: Sequence[Source]) -> Merged:
    """The deterministic merge of ``sources`` (two or more memories of one project)."""
    if len(sources) < 2:
        raise ValueError("a merge needs at least two memories")
    order = ordered(sources)
    base = order[0]
    kept = [_bag(f) for f in [*facts(base.content), base.title]]
    parts = [base.content.rstrip()]
    for source in order[1:]:
        new: list[str] = []
        for fact in facts(source.content):
            bag = _bag(fact)
            if not bag or any(_said(bag, k) for k in kept if k):
                continue
            new.append(fact)
            kept.append(bag)
        if new:
            day = source.created_at[:10]
            parts.append(
                f"**Also noted** (merged from “{source.title}”, saved {day}):\n"
                + "\n".join(f"- {_LABEL.sub('', fact) or fact}" for fact in new)
            )
    overrides = [s.importance_override for s in sources if s.importance_override is not None]
    return Merged(
        key=merged_key(project, [s.key for s in sources]),
        title=base.title,
        content="\n\n".join(parts),
        type=base.type,
        topic_key=base.topic_key or next((s.topic_key for s in order if s.topic_key), None),
        tool_name=base.tool_name,
        session_id=base.session_id,
        duplicate_count=sum(max(1, s.duplicate_count) for s in sources),
        importance_override=max(overrides) if overrides else None,
        sources=tuple(s.key for s in order),
    )

"""Importance: how much a memory matters, scored with the first seed's formula (pure functions,
shared by the store, the faces and the cloud server).

    importance = clamp(0.15·length + 0.25·topics + 0.20·links + 0.25·recency + 0.15·access, 0, 1)

with each signal from 0 to 1: ``length`` = characters of content / 2000, ``topics`` = topic
tags / 5, ``links`` = links to other memories / 3, ``recency`` = 1 − days since the memory last
changed (or was confirmed) / 90, ``access`` = searches and reads that returned it / 10.

A memory's topic tags are the segments of its topic key (``architecture/auth`` → 2) plus its
type, unless the type is the default ``manual`` (which says nothing about the memory).

The user may override the score per memory (``importance_override``, a payload field that
travels with the memory); the computed score is local, derived data (docs/importance.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from engram.errors import ValidationError
from engram.record import importance_problem

WEIGHTS = {"length": 0.15, "topics": 0.25, "links": 0.20, "recency": 0.25, "access": 0.15}
LENGTH_FULL = 2000  # characters of content that give the whole length signal
TOPICS_FULL = 5
LINKS_FULL = 3
RECENCY_DAYS = 90  # the recency signal falls linearly to 0 over this many days
ACCESS_FULL = 10
#: Consolidation archives memories scored below this (never pinned ones).
DEFAULT_ARCHIVE_THRESHOLD = 0.1
#: What clears an override, so the computed score applies again.
AUTO: Literal["auto"] = "auto"
_AUTO_WORDS = frozenset({"auto", "none", "computed", "clear"})
_STORE_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True, slots=True)
class Signals:
    """The five signals of one memory, each from 0 to 1."""

    length: float
    topics: float
    links: float
    recency: float
    access: float

    def score(self) -> float:
        return _score(self.length, self.topics, self.links, self.recency, self.access)

    def to_dict(self) -> dict[str, float]:
        return {name: round(value, 4) for name, value in asdict(self).items()}


def _score(length: float, topics: float, links: float, recency: float, access: float) -> float:
    """The weighted sum of the five signals, clamped and rounded."""
    total = (
        WEIGHTS["length"] * length
        + WEIGHTS["topics"] * topics
        + WEIGHTS["links"] * links
        + WEIGHTS["recency"] * recency
        + WEIGHTS["access"] * access
    )
    return round(min(1.0, max(0.0, total)), 4)


# Cached: a bulk apply scores thousands of memories, most of them with the same few topic keys
# and types and with timestamps a second apart (parsing a timestamp was half of a score).
@functools.lru_cache(maxsize=1024)
def topic_count(topic_key: str | None, type: str | None) -> int:
    """Distinct topic tags: the topic key's segments, plus the type unless it is ``manual``."""
    tags = {part for part in (topic_key or "").lower().split("/") if part.strip()}
    kind = (type or "").strip().lower()
    if kind and kind != "manual":
        tags.add(kind)
    return len(tags)


@functools.lru_cache(maxsize=1024)
def days_since(stamp: str | None, now: datetime) -> float:
    """Days from a stored timestamp to ``now`` (0 for a missing or unreadable one, never
    negative: a timestamp from a clock ahead of ours is "now")."""
    if not stamp:
        return 0.0
    try:
        then = datetime.fromisoformat(stamp[:19]).replace(tzinfo=UTC)
    except ValueError:
        return 0.0
    return max(0.0, (now - then).total_seconds() / 86_400)


def signals(
    *,
    content: str,
    topic_key: str | None,
    type: str | None,
    links: int,
    changed_at: str | None,
    access_count: int,
    now: datetime,
) -> Signals:
    return Signals(*_signal_values(content, topic_key, type, links, changed_at, access_count, now))


def _signal_values(
    content: str,
    topic_key: str | None,
    type: str | None,
    links: int,
    changed_at: str | None,
    access_count: int,
    now: datetime,
) -> tuple[float, float, float, float, float]:
    """length, topics, links, recency and access (the fields of :class:`Signals`)."""
    return (
        min(len(content or "") / LENGTH_FULL, 1.0),
        min(topic_count(topic_key, type) / TOPICS_FULL, 1.0),
        min(max(links, 0) / LINKS_FULL, 1.0),
        max(1.0 - days_since(changed_at, now) / RECENCY_DAYS, 0.0),
        min(max(access_count, 0) / ACCESS_FULL, 1.0),
    )


def compute(
    content: str,
    topic_key: str | None,
    type: str | None,
    links: int,
    changed_at: str | None,
    access_count: int,
    now: datetime | None = None,
) -> float:
    """The computed importance of one memory (what the SQL function ``engram_importance``
    returns, so batch re-scoring and single saves agree)."""
    # Scored from the signals' values without building a Signals (an import scores every
    # memory it writes with this).
    values = _signal_values(content, topic_key, type, int(links or 0), changed_at,
                            int(access_count or 0), now or datetime.now(UTC))  # fmt: skip
    return _score(*values)


def unlinked_scorer(now: datetime) -> Callable[[str, str | None, str | None, str | None], float]:
    """``compute(content, topic_key, type, 0, changed_at, 0, now)`` — a memory no relation
    names and nobody read — as one call, for a batch that scores thousands of memories at
    the one instant ``now``: the same signals and sum, without the general path's calls (an
    import scored each new memory in ~2 µs, most of it calls), each time since a memory
    changed worked out once."""
    recency_of: dict[str | None, float] = {}

    def score(
        content: str, topic_key: str | None, type: str | None, changed_at: str | None
    ) -> float:
        recency = recency_of.get(changed_at)
        if recency is None:
            recency = recency_of[changed_at] = max(
                1.0 - days_since(changed_at, now) / RECENCY_DAYS, 0.0
            )
        # (No links and no reads: their signals are 0.0, as _signal_values gives them.)
        return _score(
            min(len(content or "") / LENGTH_FULL, 1.0),
            min(topic_count(topic_key, type) / TOPICS_FULL, 1.0),
            0.0,
            recency,
            0.0,
        )

    return score


def sql_function() -> Any:
    """``engram_importance(content, topic_key, type, links, changed_at, access_count, now)``
    for SQLite's ``create_function`` (``now`` in the store's format, passed by the statement so
    that one statement scores every row at the same instant)."""
    moments: dict[str, datetime] = {}

    def engram_importance(content, topic_key, kind, links, changed_at, access_count, now):
        moment = moments.get(now)
        if moment is None:
            moments.clear()  # one instant per statement: keep the cache tiny
            moment = moments[now] = datetime.strptime(now, _STORE_FORMAT).replace(tzinfo=UTC)
        return compute(content, topic_key, kind, links, changed_at, access_count, moment)

    return engram_importance


def effective(override: float | None, computed: float | None) -> float:
    """The importance a memory has: the user's override, else the computed score."""
    if override is not None:
        return float(override)
    return float(computed or 0.0)


def check_importance(value: Any, field: str = "importance") -> float:
    """A valid importance (a finite number from 0 to 1; numeric text is read as a number),
    else a :class:`ValidationError` naming ``field``."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValidationError(
                f"{field} must be a number from 0 to 1, got {value!r}", field=field
            ) from None
    if problem := importance_problem(number):
        raise ValidationError(f"{field} {problem}", field=field)
    return float(number)


def importance_argument(value: Any, field: str = "importance") -> float | Literal["auto"]:
    """An override as the faces receive it: a number from 0 to 1, or ``auto`` (also ``none``,
    ``computed``, ``clear``) to drop the override."""
    if isinstance(value, str) and value.strip().lower() in _AUTO_WORDS:
        return AUTO
    try:
        return check_importance(value, field)
    except ValidationError as exc:
        raise ValidationError(f"{exc} (or 'auto' for the computed score)", field=field) from None

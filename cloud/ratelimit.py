"""Counting events per key in PostgreSQL, so every server process behind a load balancer sees the
same counts: wrong bearer tokens per client address, heartbeats per member principal. (Dashboard
logins have their own two-key rule in :mod:`engram_cloud.dashboard.auth`, on the same table.)

Rows live in ``cloud_login_attempts`` (``key``, ``attempted_at``, ``succeeded``), indexed by
``(key, attempted_at)``; a key names what is limited (``bearer:<address>``,
``heartbeat:<owner>``). Every :data:`PRUNE_EVERY`-th row written drops rows older than
:data:`RETENTION`, so the table stays as small as the windows need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Connection, delete, func, insert, select

from engram_cloud import models

RETENTION = timedelta(days=1)  # longer than any window below
PRUNE_EVERY = 500

#: Wrong bearer tokens one client address may present within :data:`BAD_TOKEN_WINDOW` before
#: every request from it (right token or not) gets 429 until the oldest failure ages out.
MAX_BAD_TOKENS = 30
BAD_TOKEN_WINDOW = timedelta(minutes=5)
HEARTBEAT_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Window:
    """How many events ``key`` had in the window, and when the oldest of them leaves it."""

    count: int
    retry_after: int  # whole seconds (at least 1) until the count drops

    def over(self, limit: int) -> bool:
        return self.count >= limit


def recent(conn: Connection, key: str, window: timedelta, *, limit: int) -> Window:
    """The events of ``key`` within ``window`` (counted up to ``limit``: enough to decide)."""
    a = models.login_attempts
    newest = (
        select(a.c.attempted_at)
        .where(a.c.key == key, a.c.attempted_at > func.now() - window)
        .order_by(a.c.attempted_at.desc())
        .limit(limit)
        .subquery()
    )
    count, oldest_left = conn.execute(
        select(
            func.count(),
            func.extract("epoch", func.min(newest.c.attempted_at) + window - func.now()),
        )
    ).one()
    return Window(int(count), max(1, math.ceil(float(oldest_left or 0))))


def record(conn: Connection, key: str) -> None:
    """One event for ``key`` now (pruning old rows when its turn comes)."""
    a = models.login_attempts
    row_id = conn.execute(insert(a).values(key=key[:200]).returning(a.c.id)).scalar_one()
    if row_id % PRUNE_EVERY == 0:
        prune(conn)


def prune(conn: Connection) -> int:
    a = models.login_attempts
    return conn.execute(delete(a).where(a.c.attempted_at < func.now() - RETENTION)).rowcount

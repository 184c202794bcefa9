"""The cloud client's local bookkeeping in the store's database: which projects are enrolled,
one row per (server, project) in ``sync_cloud_projects`` (pull cursor, last push/pull, why the
project is blocked, upgrade stage), and one ``sync_state`` row per server (autosync phase,
failures, backoff, last error and reason, the lease).

The store has no API for these tables (they belong to cloud sync alone), so this module is
their only reader and writer. Every write is one short transaction of its own, or joins the
caller's (``store.db.write()`` is re-entrant), so cursor moves commit with the pulled mutations
they account for.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from engram.errors import ValidationError
from engram.project import project_name
from engram.times import iso, now_text

if TYPE_CHECKING:
    from engram.store import Store

PROJECT_FIELDS = (
    "last_pulled_seq",
    "last_push_at",
    "last_pull_at",
    "reason_code",
    "reason_message",
    "dead_count",
    "last_dead_error",
    "upgrade_stage",
    "upgrade_reason_code",
    "upgrade_reason_message",
    "refused_until",
    "refused_count",
)
STATE_FIELDS = (
    "lifecycle",
    "consecutive_failures",
    "backoff_until",
    "last_error",
    "reason_code",
    "reason_message",
    "last_sync_at",
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def project_arg(raw: str | None) -> str:
    """A project name as the store keeps it, or :class:`ValidationError` when empty."""
    name = project_name(raw or "")
    if not name:
        raise ValidationError("a project name is required", field="project")
    return name


# --- enrollment ---------------------------------------------------------------------------------


def enrolled_projects(store: Store) -> list[str]:
    return [r[0] for r in store.db.rows("SELECT project FROM sync_enrolled_projects ORDER BY 1")]


def is_enrolled(store: Store, project: str) -> bool:
    return (
        store.db.one("SELECT 1 FROM sync_enrolled_projects WHERE project = ?", (project,))
        is not None
    )


def enroll(store: Store, project: str) -> bool:
    """Opt ``project`` into cloud sync; whether it was newly enrolled."""
    with store.db.write() as conn:
        return (
            conn.execute(
                "INSERT OR IGNORE INTO sync_enrolled_projects(project, enrolled_at) VALUES (?, ?)",
                (project, now_text()),
            ).rowcount
            > 0
        )


def unenroll(store: Store, project: str) -> bool:
    """Stop syncing ``project`` (local memories, server data and cursors stay)."""
    with store.db.write() as conn:
        return (
            conn.execute(
                "DELETE FROM sync_enrolled_projects WHERE project = ?", (project,)
            ).rowcount
            > 0
        )


# --- per (server, project) ----------------------------------------------------------------------


def project_row(store: Store, target: str, project: str) -> dict[str, Any] | None:
    row = store.db.one(
        "SELECT * FROM sync_cloud_projects WHERE target = ? AND project = ?", (target, project)
    )
    return None if row is None else dict(row)


def cursors(store: Store, target: str, projects: Iterable[str]) -> dict[str, int]:
    """The pull cursor of each project (0 when it never pulled from this server)."""
    names = sorted(set(projects))
    found = {name: 0 for name in names}
    if names:
        rows = store.db.rows(
            f"""SELECT project, last_pulled_seq FROM sync_cloud_projects
                WHERE target = ? AND project IN ({", ".join("?" for _ in names)})""",
            [target, *names],
        )
        found.update({r[0]: int(r[1]) for r in rows})
    return found


def update_project(store: Store, target: str, project: str, **values: Any) -> None:
    """Set some fields of a project's row (created on first use)."""
    unknown = set(values) - set(PROJECT_FIELDS)
    if unknown:
        raise ValueError(f"unknown sync_cloud_projects fields: {sorted(unknown)}")
    with store.db.write() as conn:
        _ensure_project(conn, target, project)
        if values:
            sets = ", ".join(f"{name} = :{name}" for name in values)
            conn.execute(
                f"""UPDATE sync_cloud_projects SET {sets}, updated_at = :now
                    WHERE target = :target AND project = :project""",
                {**values, "now": now_text(), "target": target, "project": project},
            )


def _ensure_project(conn: sqlite3.Connection, target: str, project: str) -> None:
    conn.execute(
        """INSERT OR IGNORE INTO sync_cloud_projects(target, project, updated_at)
           VALUES (?, ?, ?)""",
        (target, project, now_text()),
    )


def advance_cursor(store: Store, target: str, projects: Iterable[str], seq: int) -> None:
    """Move the projects' cursors forward to ``seq`` (never back: two pullers may race)."""
    stamp = iso(utc_now(), milliseconds=True)
    with store.db.write() as conn:
        for project in projects:
            _ensure_project(conn, target, project)
            conn.execute(
                """UPDATE sync_cloud_projects
                   SET last_pulled_seq = MAX(last_pulled_seq, ?), last_pull_at = ?, updated_at = ?
                   WHERE target = ? AND project = ?""",
                (seq, stamp, now_text(), target, project),
            )


def forget_project(store: Store, target: str, project: str) -> bool:
    """Drop the project's cursor and status for this server."""
    with store.db.write() as conn:
        return (
            conn.execute(
                "DELETE FROM sync_cloud_projects WHERE target = ? AND project = ?",
                (target, project),
            ).rowcount
            > 0
        )


# --- per server: status and lease ---------------------------------------------------------------


def read_state(store: Store, target: str) -> dict[str, Any]:
    row = store.db.one("SELECT * FROM sync_state WHERE target_key = ?", (target,))
    if row is None:
        return {"target_key": target, "lifecycle": "idle", "consecutive_failures": 0}
    return dict(row)


def write_state(store: Store, target: str, **values: Any) -> None:
    unknown = set(values) - set(STATE_FIELDS)
    if unknown:
        raise ValueError(f"unknown sync_state fields: {sorted(unknown)}")
    with store.db.write() as conn:
        conn.execute("INSERT OR IGNORE INTO sync_state(target_key) VALUES (?)", (target,))
        if values:
            sets = ", ".join(f"{name} = :{name}" for name in values)
            conn.execute(
                f"UPDATE sync_state SET {sets}, updated_at = :now WHERE target_key = :target",
                {**values, "now": now_text(), "target": target},
            )


def acquire_lease(store: Store, target: str, owner: str, ttl_s: float) -> bool:
    """Take or renew the sync lease of ``target``: it succeeds unless another owner holds an
    unexpired one. Only the holder syncs, so two local processes never sync at once."""
    now = utc_now()
    with store.db.write() as conn:
        conn.execute("INSERT OR IGNORE INTO sync_state(target_key) VALUES (?)", (target,))
        held_by, until = conn.execute(
            "SELECT lease_owner, lease_until FROM sync_state WHERE target_key = ?", (target,)
        ).fetchone()
        expiry = parse_iso(until)
        if held_by and held_by != owner and expiry is not None and expiry > now:
            return False
        conn.execute(
            "UPDATE sync_state SET lease_owner = ?, lease_until = ? WHERE target_key = ?",
            (owner, iso(now + timedelta(seconds=ttl_s), milliseconds=True), target),
        )
        return True


def release_lease(store: Store, target: str, owner: str) -> None:
    with store.db.write() as conn:
        conn.execute(
            """UPDATE sync_state SET lease_owner = NULL, lease_until = NULL
               WHERE target_key = ? AND lease_owner = ?""",
            (target, owner),
        )


def lease_holder(store: Store, target: str) -> str | None:
    """The owner of an unexpired lease, if any."""
    row = store.db.one(
        "SELECT lease_owner, lease_until FROM sync_state WHERE target_key = ?", (target,)
    )
    if row is None or not row[0]:
        return None
    expiry = parse_iso(row[1])
    return row[0] if expiry is not None and expiry > utc_now() else None


# --- journal views the cloud client needs -------------------------------------------------------


def journal_top(store: Store) -> int:
    """The newest journal seq (any write, by any process, moves it)."""
    return int(store.db.scalar("SELECT COALESCE(MAX(seq), 0) FROM sync_journal") or 0)


def quarantined_rows(store: Store, target: str, project: str | None = None) -> list[dict[str, Any]]:
    """Rows the server rejected, with their project (all projects when ``project`` is None)."""
    sql = """SELECT q.seq, q.mid, q.error_code, q.error, q.attempts, q.quarantined_at,
                    j.project, j.entity, j.key
             FROM sync_quarantine q JOIN sync_journal j ON j.seq = q.seq
             WHERE q.target = ?"""
    params: list[Any] = [target]
    if project is not None:
        sql += " AND j.project = ?"
        params.append(project)
    return [dict(r) for r in store.db.rows(sql + " ORDER BY q.seq", params)]


def release_quarantined(store: Store, target: str, project: str | None = None) -> int:
    """Put rejected rows back in the push queue (all of the target's, or one project's)."""
    from engram.store import quarantine

    return quarantine.release_outbound(
        store.db, target=target, projects=None if project is None else [project]
    )


def local_mids(
    store: Store, target: str, project: str, *, include_personal: bool = False
) -> dict[str, int]:
    """``{mid: seq}`` of the project's journal rows that belong on the server (not personal
    unless asked, not quarantined, not superseded before they were sent)."""
    from engram.store.journal import sendable

    rows = store.db.rows(
        f"""SELECT j.mid, j.seq FROM sync_journal j
            WHERE j.project = ? AND (? OR j.scope != 'personal') AND {sendable("j")}
              AND NOT EXISTS (SELECT 1 FROM sync_quarantine q
                              WHERE q.target = ? AND q.seq = j.seq)""",
        (project, int(include_personal), target),
    )
    return {r[0]: int(r[1]) for r in rows}


def known_mids(store: Store, mids: Iterable[str]) -> set[str]:
    """The subset of ``mids`` this store's journal holds."""
    return set(store.journal.seqs_for_mids(mids))


def forget_delivery(store: Store, target: str, seqs: Iterable[int]) -> int:
    """Make rows pending again for ``target`` (it turned out not to hold them)."""
    return store.journal.forget_delivered(target, seqs)

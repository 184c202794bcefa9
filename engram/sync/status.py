"""The cloud-sync status of one project, as ``GET /sync/status`` (and later ``engram cloud
status``) report it.

Today no cloud client exists, so the answer is always "not enabled" with a reason code. The
extension point is :class:`StatusSource`: the cloud/autosync issue passes its manager as
``source`` (``engram serve`` hands it to the HTTP app), and its per-project snapshot is laid over
the defaults below, so every caller keeps getting the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engram.store import Store

CLOUD_NOT_CONFIGURED = "cloud_not_configured"
PROJECT_REQUIRED = "project_required"


class StatusSource(Protocol):
    """What a configured cloud client provides: its snapshot for one project, with any of the
    keys of :func:`sync_status` (``phase``, ``last_error``, ``consecutive_failures``,
    ``backoff_until``, ``last_sync_at``, ``reason_code``, ``reason_message``,
    ``deferred_count``, ``dead_count``, ``upgrade``)."""

    def status(self, store: Store, project: str) -> Mapping[str, Any]: ...


def _defaults(project: str) -> dict[str, Any]:
    return {
        "project": project,
        "enabled": False,
        "phase": "disabled",
        "last_error": None,
        "consecutive_failures": 0,
        "backoff_until": None,
        "last_sync_at": None,
        "reason_code": None,
        "reason_message": None,
        "deferred_count": 0,
        "dead_count": 0,
        "upgrade": {"stage": None, "reason_code": None, "reason_message": None},
    }


def sync_status(
    store: Store, project: str, *, source: StatusSource | None = None
) -> dict[str, Any]:
    """The status fields of reference §5.3 for ``project`` ('' when none could be resolved).

    Without a ``source`` the cloud is not configured; with one but no project the caller must
    name one (each project has its own cursor and enrollment).
    """
    status = _defaults(project)
    if source is None:
        status.update(
            reason_code=CLOUD_NOT_CONFIGURED,
            reason_message="cloud sync is not configured: no cloud server is set for this "
            "machine, so memories stay local (git sync still works)",
        )
        return status
    if not project:
        status.update(
            reason_code=PROJECT_REQUIRED,
            reason_message="cloud sync status is per project: pass ?project=<name>",
        )
        return status
    snapshot = dict(source.status(store, project))
    upgrade = {**status["upgrade"], **dict(snapshot.pop("upgrade", None) or {})}
    status.update(enabled=True, phase="idle")
    status.update(snapshot, upgrade=upgrade)
    return status

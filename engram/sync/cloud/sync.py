"""Cloud sync services: push a project's pending journal rows to the server and pull what
teammates pushed. ``engram sync --cloud``, ``engram cloud upgrade`` and the autosync loop all
call these, so the rules live once:

* Only enrolled projects are pushed or applied; personal-scope rows stay home unless
  ``include_personal``.
* A journal row is acknowledged (delivered to ``cloud:<server>``) only when the server's answer
  names its exact mid as accepted. A rejected mid goes to the local quarantine with the server's
  error code; a mid the answer does not mention stays pending and is sent again next time.
* Pulled records are applied and the project's cursor moved in one transaction, so a crash
  between the two cannot skip anything (and re-applying a mid is a no-op).
* One cursor per (server, project). Projects whose cursors agree share one request (and one
  long-poll); a newly enrolled project catches up on its own first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engram.store.models import ApplyResult
from engram.sync.cloud import refusals, state
from engram.sync.cloud.client import (
    MAX_PUSH_BATCH,
    PAUSED,
    PAYLOAD_TOO_LARGE,
    POLICY_FORBIDDEN,
    CloudClient,
    CloudError,
    PullPage,
)
from engram.sync.cloud.config import CloudConfig
from engram.sync.progress import ProgressFactory, default_author, no_progress
from engram.times import iso

if TYPE_CHECKING:
    from engram.store import Store
    from engram.store.journal import JournalEntry

BLOCKED_UNENROLLED = "blocked_unenrolled"
PULL_LIMIT = 500
#: A push request carries at most this many bytes of records (the server's default limit is
#: 8 MiB once decompressed; a batch the server still refuses with 413 is split in halves).
MAX_PUSH_BYTES = 4 * 1024 * 1024
#: Per-project reasons a push can leave behind (cleared by the next successful push).
PROJECT_REASONS = (PAUSED, POLICY_FORBIDDEN, BLOCKED_UNENROLLED)


def unenrolled_error(project: str) -> CloudError:
    return CloudError(
        BLOCKED_UNENROLLED,
        f'project "{project}" is not enrolled for cloud sync: run \'engram cloud enroll '
        f"{project}' first",
        project=project,
    )


# --- reports ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ProjectPush:
    project: str
    sent: int = 0  # records sent (a record sent twice counts twice)
    acknowledged: int = 0  # journal rows newly marked as held by the server
    rejected: list[dict[str, Any]] = field(default_factory=list)  # quarantined now
    unconfirmed: int = 0  # sent, neither accepted nor rejected: still pending
    error: dict[str, Any] | None = None  # the failure that stopped this project

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ProjectPull:
    project: str
    received: int = 0
    applied: ApplyResult = field(default_factory=ApplyResult)
    dead: int = 0  # records this store could not apply
    cursor: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["applied"] = asdict(self.applied)
        return data


# --- the service --------------------------------------------------------------------------------


class CloudSync:
    """Push/pull between one store and one server."""

    def __init__(
        self,
        store: Store,
        config: CloudConfig,
        *,
        client: CloudClient | None = None,
        created_by: str | None = None,
        include_personal: bool = False,
        progress: ProgressFactory = no_progress,
        backoff: refusals.Backoff = refusals.DEFAULT_BACKOFF,
    ) -> None:

        self.store = store
        self.config = config.require()
        self.target = config.target
        self._own_client = client is None
        self.client = client or CloudClient(config)
        self.created_by = created_by or default_author()
        self.include_personal = include_personal
        self.progress = progress
        self.backoff = backoff  # how long a refused project is left alone (autosync)

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __enter__(self) -> CloudSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- enrollment -------------------------------------------------------------------------

    def require_enrolled(self, project: str) -> None:
        """Raise ``blocked_unenrolled`` (and remember it for status) unless enrolled."""
        if state.is_enrolled(self.store, project):
            return
        error = unenrolled_error(project)
        state.update_project(
            self.store,
            self.target,
            project,
            reason_code=BLOCKED_UNENROLLED,
            reason_message=str(error),
        )
        raise error

    # --- push -------------------------------------------------------------------------------

    def count_pending(self, projects: Iterable[str]) -> int:
        return self.store.journal.count_pending(
            self.target, projects=list(projects), include_personal=self.include_personal
        )

    def push(self, projects: Sequence[str]) -> list[ProjectPush]:
        """Push every pending row of each (enrolled) project. A project the server refuses
        (paused, forbidden) is reported and the others go on; authentication and transport
        failures stop everything (raised)."""
        reports = []
        for project in projects:
            self.require_enrolled(project)
        for project in projects:
            reports.append(self.push_project(project))
        return reports

    def push_project(self, project: str, *, after_seq: int = 0) -> ProjectPush:
        """Push ``project``'s pending rows (seq > ``after_seq``), 500 per request.

        Raises :class:`CloudError` for failures that concern the whole server
        (``auth_required``, ``transport_failed``); ``paused`` and ``policy_forbidden`` are
        recorded on the project, with a growing wait autosync honours
        (:mod:`engram.sync.cloud.refusals`), and returned in the report.
        """
        report = ProjectPush(project)
        # Counting costs a scan: only when someone shows progress.
        total = self.count_pending([project]) if self.progress is not no_progress else 0
        try:
            with self.progress(f"Pushing {project}", total) as advance:
                for rows in self._pending(project, after_seq):
                    for batch in _split_by_bytes(rows):
                        self._push_rows(project, batch, report)
                        advance(len(batch))
        except CloudError as exc:
            if exc.reason_code in (PAUSED, POLICY_FORBIDDEN):
                report.error = exc.to_dict()
                refusal = refusals.note(
                    self.store, self.target, project, exc.reason_code, str(exc), self.backoff
                )
                report.error["retry_at"] = iso(refusal.until, milliseconds=True)
                return report
            raise
        self._settle_project(project, pushed=report.sent > 0)
        return report

    def _pending(self, project: str, after_seq: int) -> Iterator[list[JournalEntry]]:
        journal = self.store.journal
        while True:
            rows = journal.pending(
                self.target,
                projects=[project],
                include_personal=self.include_personal,
                after_seq=after_seq,
                limit=MAX_PUSH_BATCH,
            )
            if not rows:
                return
            yield rows
            after_seq = rows[-1].seq

    def _push_rows(self, project: str, rows: list[JournalEntry], report: ProjectPush) -> None:
        try:
            answer = self.client.push(
                [r.record for r in rows], created_by=self.created_by, project=project
            )
        except CloudError as exc:
            if exc.reason_code != PAYLOAD_TOO_LARGE:
                raise
            if len(rows) == 1:
                row = rows[0]
                self.store.journal.quarantine(
                    self.target, row.seq, row.mid, PAYLOAD_TOO_LARGE, str(exc)
                )
                report.rejected.append(
                    {"mid": row.mid, "error_code": PAYLOAD_TOO_LARGE, "error": str(exc)}
                )
                return
            half = len(rows) // 2
            self._push_rows(project, rows[:half], report)
            self._push_rows(project, rows[half:], report)
            return
        report.sent += len(rows)
        seq_of = {r.mid: r.seq for r in rows}
        accepted = [seq_of[m] for m in dict.fromkeys(answer.accepted) if m in seq_of]
        report.acknowledged += self.store.journal.mark_delivered(self.target, accepted)
        rejected = 0
        for item in answer.rejected:
            seq = seq_of.get(item.mid or "")
            if seq is None:
                continue
            rejected += 1
            self.store.journal.quarantine(
                self.target, seq, item.mid or "", item.error_code, item.error
            )
            report.rejected.append(
                {"mid": item.mid, "error_code": item.error_code, "error": item.error}
            )
        report.unconfirmed += max(0, len(rows) - len(accepted) - rejected)

    def _settle_project(self, project: str, *, pushed: bool) -> None:
        """After a successful push: clear a refusal the project had, note the push time (no
        write at all when nothing changed: autosync pushes after every local write)."""
        values: dict[str, Any] = {}
        if pushed:
            values["last_push_at"] = iso(state.utc_now(), milliseconds=True)
        row = state.project_row(self.store, self.target, project)
        if row is not None and row.get("reason_code") in PROJECT_REASONS:
            values.update(reason_code=None, reason_message=None)
        if row is not None and row.get("refused_until"):
            values.update(refused_until=None, refused_count=0)
        if values:
            state.update_project(self.store, self.target, project, **values)

    # --- pull -------------------------------------------------------------------------------

    def pull(
        self,
        projects: Sequence[str],
        *,
        wait: float = 0,
        max_pages: int | None = None,
        on_page: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> dict[str, ProjectPull]:
        """Pull and apply everything new for ``projects`` (each must be enrolled).

        With ``wait``, the first request long-polls when every cursor agrees. ``max_pages``
        bounds the work of one call (autosync comes back for the rest); ``cancelled`` is asked
        after every request."""
        for project in projects:
            self.require_enrolled(project)
        reports = {p: ProjectPull(p) for p in projects}
        caught_up: set[str] = set()
        pages = 0

        def more() -> bool:
            return max_pages is None or pages < max_pages

        # While a page is applied, the next one is already on its way (one request at a time
        # still: the client is used by one thread at any moment).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-pull") as ahead:
            while more():
                cursors = state.cursors(self.store, self.target, projects)
                for name, seq in cursors.items():
                    reports[name].cursor = seq
                lowest = min(cursors.values(), default=0)
                group = sorted(p for p, seq in cursors.items() if seq == lowest)
                single = len(set(cursors.values())) <= 1
                page = self.client.pull(
                    lowest, group, limit=PULL_LIMIT, wait=wait if (single and pages == 0) else 0
                )
                pages += 1
                while True:
                    if cancelled is not None and cancelled():
                        return reports  # stopped while a request was out: apply nothing more
                    following: Future[PullPage] | None = None
                    if page.has_more and more():
                        following = ahead.submit(
                            self.client.pull, page.next, group, limit=PULL_LIMIT
                        )
                    self._apply_page(group, cursors, page.mutations, page.next, reports)
                    cursors = {**cursors, **dict.fromkeys(group, page.next)}
                    if on_page is not None:
                        on_page(len(page.mutations))
                    if following is None:
                        break
                    page = following.result()
                    pages += 1
                if not page.has_more:
                    caught_up.update(group)
                    # Everything that existed when this call began is here once every project
                    # caught up (cursors that still differ are merged by the next call).
                    if single or caught_up >= set(projects):
                        break
        for project in projects:
            self._settle_pull(project)
        return reports

    def _settle_pull(self, project: str) -> None:
        """The server just let us read ``project``: a 403 it gave before no longer holds."""
        row = state.project_row(self.store, self.target, project)
        if row is not None and row.get("reason_code") == POLICY_FORBIDDEN:
            state.update_project(
                self.store,
                self.target,
                project,
                reason_code=None,
                reason_message=None,
                refused_until=None,
                refused_count=0,
            )

    def _apply_page(
        self,
        group: list[str],
        cursors: dict[str, int],
        mutations: list[dict[str, Any]],
        next_seq: int,
        reports: dict[str, ProjectPull],
    ) -> None:
        wanted = set(group)
        by_project: dict[str, list[dict[str, Any]]] = {}
        for item in mutations:
            if not isinstance(item, dict):
                continue
            record = dict(item)
            seq = record.pop("seq", None)
            project = record.get("project")
            if project not in wanted:
                continue  # the server answers only what we asked; never apply anything else
            if isinstance(seq, int) and seq <= cursors.get(project, 0):
                continue
            reports[project].received += 1
            by_project.setdefault(project, []).append(record)
        with self.store.db.write():
            for project, records in by_project.items():
                self._apply(project, records, reports[project])
            state.advance_cursor(self.store, self.target, group, next_seq)
        for project in group:
            reports[project].cursor = max(reports[project].cursor, next_seq)

    def _apply(self, project: str, records: list[dict[str, Any]], report: ProjectPull) -> None:
        # A record this store cannot apply (yet) waits in its quarantine with its reason and
        # never blocks the others or the cursor (engram sync --quarantine lists it).
        report.applied.add(self.store.apply_mutations(records, source=self.target))


def _split_by_bytes(rows: list[JournalEntry]) -> Iterator[list[JournalEntry]]:
    """Consecutive slices of ``rows`` of at most :data:`MAX_PUSH_BYTES` of record text."""
    batch: list[JournalEntry] = []
    size = 0
    for row in rows:
        cost = len(row.record) + 1
        if batch and size + cost > MAX_PUSH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += cost
    if batch:
        yield batch

"""``engram ingest-git``: one memory per meaningful change set of a repository's recent history.

History is read with the real ``git`` binary (an argv list, never a shell string) in one
``git log`` call. Change sets follow the first-parent line of ``HEAD``, the way a team reads
its main branch: a plain commit is one change set; a merge is one change set together with the
commits it brought in (their messages, files and authors), so a merged pull request is one
memory, not one per commit. Bot change sets (dependabot, renovate, CI bots: every commit by a
``[bot]`` author) are skipped unless asked for.

Idempotent: a change set's memory has the topic key ``git/<sha>``, so its sync id is derived
from (project, scope, topic) the same way on every machine; one already present (or deleted
on purpose) is never saved again, so ingesting twice, or on two machines, adds nothing.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.errors import EngramError, NotFoundError, ValidationError
from engram.sync.progress import ProgressFactory, no_progress
from engram.text import topic_sync_id

if TYPE_CHECKING:
    from engram.store import Store

MEMORY_TYPE = "commit"
TOOL_NAME = "engram-ingest-git"
DEFAULT_DAYS = 30
MAX_DAYS = 36500
MAX_FILES_LISTED = 40
MAX_BODY_CHARS = 4000
_PLACEHOLDERS = ["%H", "%P", "%an", "%ae", "%aI", "%s", "%b"]
_BOT = re.compile(r"\[bot\]|^(?:dependabot|renovate|github-actions|greenkeeper|snyk-bot)\b", re.I)


@dataclass(slots=True)
class Commit:
    sha: str
    parents: list[str]
    author: str
    email: str
    date: str  # ISO 8601 with offset
    subject: str
    body: str
    files: list[str]

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def is_bot(self) -> bool:
        return bool(_BOT.search(self.author) or _BOT.search(self.email.split("@")[0]))


@dataclass(slots=True)
class ChangeSet:
    """What one memory is made of: a first-parent commit, and for a merge, its branch."""

    head: Commit
    branch: list[Commit] = field(default_factory=list)  # commits a merge brought in, newest first

    @property
    def commits(self) -> list[Commit]:
        return [self.head, *self.branch]

    @property
    def is_bot(self) -> bool:
        work = [c for c in self.commits if not c.is_merge] or [self.head]
        return all(c.is_bot for c in work)

    @property
    def topic_key(self) -> str:
        return f"git/{self.head.sha}"

    def title(self) -> str:
        subject = self.head.subject.strip() or f"Commit {self.head.sha[:12]}"
        return subject if len(subject) <= 200 else subject[:199] + "…"

    def content(self) -> str:
        """**What** (the messages), **Where** (files), then who and when."""
        body = self.head.body.strip()
        if len(body) > MAX_BODY_CHARS:
            body = body[:MAX_BODY_CHARS] + "…"
        what = self.head.subject.strip() + (f"\n{body}" if body else "")
        if self.branch:
            what += "\n" + "\n".join(f"- {c.subject.strip()}" for c in self.branch if c.subject)
        files = sorted({f for c in self.commits for f in c.files})
        where = ", ".join(files[:MAX_FILES_LISTED])
        if len(files) > MAX_FILES_LISTED:
            where += f", and {len(files) - MAX_FILES_LISTED} more"
        authors = sorted({c.author for c in self.commits if not c.is_merge} or {self.head.author})
        kind = f"merge of {len(self.branch)} commits" if self.branch else "commit"
        lines = [f"**What**: {what}"]
        if where:
            lines.append(f"**Where**: {where}")
        lines.append(f"Git {kind} {self.head.sha[:12]} by {', '.join(authors)} on {self.head.date}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sha": self.head.sha,
            "title": self.title(),
            "merge_of": len(self.branch),
            "authors": sorted({c.author for c in self.commits}),
            "date": self.head.date,
        }


@dataclass(slots=True)
class IngestReport:
    repo: str
    project: str
    days: int
    commits_read: int = 0
    change_sets: int = 0
    added: list[dict[str, Any]] = field(default_factory=list)
    already_present: int = 0
    skipped_bots: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _git(repo: Path, *args: str) -> str:
    if shutil.which("git") is None:
        raise EngramError("git is not installed (needed to read the repository's history)")
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "-c", "core.quotepath=off", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise EngramError(f"git {args[0]} took longer than 5 minutes in {repo}") from None
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise ValidationError(f"git {args[0]} in {repo}: {message}", field="repo")
    return done.stdout


def check_days(days: Any) -> int:
    if isinstance(days, bool):
        raise ValidationError("days must be a whole number of days", field="days")
    try:
        value = int(days)
    except (TypeError, ValueError):
        raise ValidationError(f"days must be a whole number, got {days!r}", field="days") from None
    if not 1 <= value <= MAX_DAYS:
        raise ValidationError(f"days must be between 1 and {MAX_DAYS}, got {value}", field="days")
    return value


def repo_root(path: str | Path) -> Path:
    """The top of the work tree holding ``path`` (a clear error when it is not in one)."""
    where = Path(path).expanduser()
    if not where.is_dir():
        raise ValidationError(f"{where} is not a directory", field="repo")
    try:
        top = _git(where, "rev-parse", "--show-toplevel").strip()
    except ValidationError:
        raise ValidationError(f"{where} is not inside a git repository", field="repo") from None
    return Path(top)


def read_commits(repo: Path, days: int) -> list[Commit]:
    """Every commit reachable from HEAD made in the last ``days`` days, newest first."""
    try:
        _git(repo, "rev-parse", "--verify", "--quiet", "HEAD")
    except ValidationError:
        return []  # a repository without commits yet
    # Separators carry a random nonce: a commit message is written by anyone, and must never be
    # able to forge a field or a record boundary.
    nonce = secrets.token_hex(8)
    record_mark, field_mark = f"\x1e{nonce}", f"\x1f{nonce}"
    fmt = record_mark + field_mark.join(_PLACEHOLDERS) + field_mark
    # An absolute date: git's "N days ago" misreads large N (36500 days matched nothing).
    since = datetime.now(UTC) - timedelta(days=days)
    window = [f"--since={since:%Y-%m-%dT%H:%M:%SZ}"] if since.year > 1970 else []
    out = _git(
        repo, "log", *window, "--no-color", "--name-only", "--no-renames", f"--format={fmt}",
        "HEAD",
    )  # fmt: skip
    commits: list[Commit] = []
    for record in out.split(record_mark)[1:]:
        parts = record.split(field_mark)
        if len(parts) < 8:
            continue
        sha, parents, author, email, date, subject, body, tail = parts[:8]
        files = [line for line in tail.splitlines() if line.strip()]
        commits.append(Commit(sha, parents.split(), author, email, date, subject, body, files))
    return commits


def change_sets(commits: list[Commit]) -> list[ChangeSet]:
    """Group commits (newest first) into change sets along HEAD's first-parent line."""
    if not commits:
        return []
    by_sha = {c.sha: c for c in commits}
    line: list[Commit] = []
    current: Commit | None = commits[0]
    while current is not None:
        line.append(current)
        parent = current.parents[0] if current.parents else None
        current = by_sha.get(parent) if parent else None
    assigned = {c.sha for c in line}
    sets: list[ChangeSet] = []
    for head in line:
        branch: list[Commit] = []
        stack = list(head.parents[1:])
        while stack:  # the merged branch, down to where it meets the main line (or the window)
            sha = stack.pop()
            commit = by_sha.get(sha)
            if commit is None or sha in assigned:
                continue
            assigned.add(sha)
            branch.append(commit)
            stack.extend(commit.parents)
        branch.sort(key=lambda c: c.date, reverse=True)
        sets.append(ChangeSet(head, branch))
    return sets


def ingest_git(
    store: Store,
    repo: str | Path,
    project: str,
    *,
    days: int = DEFAULT_DAYS,
    include_bots: bool = False,
    progress: ProgressFactory = no_progress,
) -> IngestReport:
    """Save one memory per change set of the last ``days`` days not ingested before."""
    days = check_days(days)
    if not project:
        raise ValidationError("ingest-git needs a project", field="project")
    root = repo_root(repo)
    commits = read_commits(root, days)
    sets = change_sets(commits)
    report = IngestReport(str(root), project, days, len(commits), len(sets))
    with progress("ingest-git", len(sets)) as advance:
        for change in reversed(sets):  # oldest first: memories are saved in history's order
            advance(1)
            if change.is_bot and not include_bots:
                report.skipped_bots += 1
                continue
            if _present(store, project, change.topic_key):
                report.already_present += 1
                continue
            saved = store.add_observation(
                title=change.title(),
                content=change.content(),
                type=MEMORY_TYPE,
                project=project,
                scope="project",
                topic_key=change.topic_key,
                tool_name=TOOL_NAME,
            )
            report.warnings.extend(
                f"{change.head.sha[:12]}: {w}" for w in saved.warnings if "REDACTED" in w
            )
            report.added.append({"id": saved.observation.id, **change.to_dict()})
    return report


def _present(store: Store, project: str, topic: str) -> bool:
    """Whether this change set's memory is here already (live or archived: a memory someone
    archived is not brought back by the next ingest)."""
    try:
        store.get_observation_by_sync_id(topic_sync_id(project, "project", topic), project=project)
    except NotFoundError:
        return False
    return True

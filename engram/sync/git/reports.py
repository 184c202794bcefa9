"""What git sync's export, import and status report: plain data, with ``to_dict()`` for
``--json`` and the sentences that tell a human what was skipped and which command accepts it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engram.store.models import ApplyResult


@dataclass(slots=True)
class ChunkProblem:
    """A chunk (or manifest entry, or stray file) that could not be used, and why."""

    chunk: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.chunk}: {self.reason}"


@dataclass(slots=True)
class HeldRecords:
    """Records of the directory not applied here, and the command that accepts them."""

    project: str
    records: int
    personal: bool = False

    @property
    def accept(self) -> str:
        if self.personal:
            return "engram sync --import --include-personal"
        return f"engram sync --bind {self.project}"

    def __str__(self) -> str:
        plural = "record" if self.records == 1 else "records"
        if self.personal:
            what = f"{self.records} personal-scope {plural} of project {self.project}"
        else:
            what = f"{self.records} {plural} for project {self.project or '(none)'}"
        return f"{what} ignored: `{self.accept}` accepts them"

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "records": self.records,
            "personal": self.personal,
            "accept": self.accept,
            "message": str(self),
        }


def held_summary(counts: dict[tuple[str, bool], int]) -> list[HeldRecords]:
    return [
        HeldRecords(project, n, personal)
        for (project, personal), n in sorted(counts.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        if n
    ]


@dataclass(slots=True)
class WrittenChunk:
    id: str
    file: str
    sessions: int
    observations: int
    prompts: int
    mutations: int
    relations: int = 0


@dataclass(slots=True)
class ManifestChange:
    """What a sync did to a Go manifest (``manifest.json``; nested ones are named by path)."""

    #: the file was rewritten (in the Go tool's format)
    written: bool = False
    #: it was unreadable for the Go tool (``conflicted`` or ``invalid``) and is repaired now
    repaired: str | None = None
    #: entries of our chunks an earlier version of Engram listed there, taken out
    removed: list[str] = field(default_factory=list)
    #: Go-format chunk files the manifest had lost (a merge), listed again
    relisted: list[str] = field(default_factory=list)
    #: Go-format chunks of ours appended (--go-compat)
    appended: list[str] = field(default_factory=list)
    #: nested Go manifests (paths) repaired
    nested_repaired: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ExportReport:
    directory: str
    target: str
    projects: list[str] | None
    include_personal: bool
    chunks: list[WrittenChunk] = field(default_factory=list)
    #: chunks not applied here that were read to learn which mutations the directory holds
    chunks_indexed: int = 0
    #: journal mutations found already held by those chunks (so not written again)
    already_held: int = 0
    rescanned: bool = False
    problems: list[ChunkProblem] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    #: projects written (or asked for) that this directory is not bound to here
    unbound_projects: list[str] = field(default_factory=list)
    #: chunks of ours an earlier version wrote into chunks/, moved to log/ now
    moved: list[str] = field(default_factory=list)
    #: our index (log/index.jsonl) was rewritten
    index_rebuilt: bool = False
    manifest: ManifestChange = field(default_factory=ManifestChange)
    #: Go-format chunks were asked for (--go-compat, or the directory's setting here)
    go_compat: bool = False
    go_chunks: list[WrittenChunk] = field(default_factory=list)
    #: the project the Go-format chunks hold (the repository's), or why none were written
    go_project: str | None = None
    go_skipped: str | None = None
    #: Go directories elsewhere in the repository that were read
    go_dirs: list[str] = field(default_factory=list)

    @property
    def nothing_new(self) -> bool:
        return not self.chunks and not self.go_chunks

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.chunks)

    @property
    def warnings(self) -> list[str]:
        found = [
            f'project "{name}" is not bound to {self.directory} on this machine: teammates\' '
            f"imports ignore its records until they run `engram sync --bind {name}` "
            f"(run it here too if this repository is where {name} is shared)"
            for name in self.unbound_projects
        ]
        if self.go_compat and self.go_skipped:
            found.append(f"no Go-format chunk written: {self.go_skipped}")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "target": self.target,
            "projects": self.projects,
            "include_personal": self.include_personal,
            "nothing_new": self.nothing_new,
            "chunks": [asdict(c) for c in self.chunks],
            "sessions": self.total("sessions"),
            "observations": self.total("observations"),
            "prompts": self.total("prompts"),
            "relations": self.total("relations"),
            "mutations": self.total("mutations"),
            "chunks_indexed": self.chunks_indexed,
            "already_held": self.already_held,
            "rescanned": self.rescanned,
            "problems": [p.to_dict() for p in self.problems],
            "files_written": self.files_written,
            "moved_to_log": self.moved,
            "index_rebuilt": self.index_rebuilt,
            "manifest": self.manifest.to_dict(),
            "go_compat": self.go_compat,
            "go_project": self.go_project,
            "go_chunks": [asdict(c) for c in self.go_chunks],
            "go_skipped": self.go_skipped,
            "go_dirs": self.go_dirs,
            "unbound_projects": self.unbound_projects,
            "warnings": self.warnings,
        }


@dataclass(slots=True)
class ImportReport:
    directory: str
    target: str
    exists: bool = True
    chunks_imported: list[str] = field(default_factory=list)
    chunks_already: int = 0
    applied: ApplyResult = field(default_factory=ApplyResult)
    skipped_relations: int = 0
    failures: list[ChunkProblem] = field(default_factory=list)
    warnings: list[ChunkProblem] = field(default_factory=list)
    manifest: ManifestChange = field(default_factory=ManifestChange)
    #: Go directories elsewhere in the repository that were read
    go_dirs: list[str] = field(default_factory=list)
    #: chunks read again because records they held back may apply now
    chunks_reread: list[str] = field(default_factory=list)
    #: what the directory still holds that this machine does not apply (all its chunks)
    held: list[HeldRecords] = field(default_factory=list)
    scope: dict[str, Any] = field(default_factory=dict)

    @property
    def held_records(self) -> int:
        return sum(h.records for h in self.held)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "target": self.target,
            "exists": self.exists,
            "chunks_imported": len(self.chunks_imported),
            "imported_ids": self.chunks_imported,
            "chunks_skipped": self.chunks_already,
            "chunks_failed": len(self.failures),
            "chunks_reread": self.chunks_reread,
            "failures": [p.to_dict() for p in self.failures],
            "warnings": [p.to_dict() for p in self.warnings],
            "mutations": self.applied.to_dict(),
            "skipped_relation_mutations": self.skipped_relations,
            "manifest": self.manifest.to_dict(),
            "go_dirs": self.go_dirs,
            "held_records": self.held_records,
            "held": [h.to_dict() for h in self.held],
            "scope": self.scope,
        }


@dataclass(slots=True)
class StatusReport:
    directory: str
    target: str
    exists: bool
    chunks: int = 0
    applied: int = 0
    pending_import: list[str] = field(default_factory=list)
    pending_export: int = 0
    projects: list[str] | None = None
    sessions: int = 0
    memories: int = 0
    prompts: int = 0
    contributors: dict[str, int] = field(default_factory=dict)
    #: Live memories of the selected projects that this directory holds, as far as this
    #: store knows (what it exported there and what it applied from there); ``None`` for
    #: ``--all`` (the chunk totals above are then the answer).
    project_memories: int | None = None
    #: the Go manifest: ``ok`` | ``missing`` | ``conflicted`` | ``invalid`` | ``lists-ours``
    #: (entries an earlier version of Engram put there: the next engram sync takes them out)
    manifest: str = "missing"
    #: our index: ``ok`` | ``missing`` | ``stale`` (rewritten by the next engram sync)
    index: str = "missing"
    #: chunks of ours still in chunks/ (an earlier version's layout: moved by the next sync)
    old_layout: int = 0
    go_chunks: int = 0
    go_compat: bool = False
    go_dirs: list[str] = field(default_factory=list)
    problems: list[ChunkProblem] = field(default_factory=list)
    scope: dict[str, Any] = field(default_factory=dict)
    held: list[HeldRecords] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = [p.to_dict() for p in self.problems]
        data["held"] = [h.to_dict() for h in self.held]
        return data

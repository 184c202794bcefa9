"""What a consolidation did (or, with ``--dry-run``, would do): the same shape on every face."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class MemoryRef:
    """A memory named in a report: local id (this machine), sync id, title, importance."""

    id: int
    sync_id: str
    title: str
    importance: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class MergeStep:
    """Near-duplicates merged into one memory (``merged.id`` is 0 in a dry run)."""

    merged: MemoryRef
    sources: list[MemoryRef]
    project: str
    status: str = "planned"  # planned | merged | skipped (a source changed meanwhile) | over_max
    similarity: float = 0.0  # the lowest similarity between two of its sources

    def to_dict(self) -> dict[str, Any]:
        return {
            "merged": self.merged.to_dict(),
            "sources": [s.to_dict() for s in self.sources],
            "project": self.project,
            "status": self.status,
            "similarity": round(self.similarity, 3),
        }


@dataclass(slots=True)
class ArchiveStep:
    """A memory archived for its importance being below the threshold."""

    memory: MemoryRef
    project: str
    status: str = "planned"  # planned | archived | skipped | over_max

    def to_dict(self) -> dict[str, Any]:
        return {"memory": self.memory.to_dict(), "project": self.project, "status": self.status}


@dataclass(slots=True)
class ConsolidationReport:
    """Counts first (the first seed's processed/merged/archived/rescored), then every step."""

    project: str | None
    dry_run: bool
    threshold: float
    similarity: float
    processed: int = 0  # live memories examined
    merged: int = 0  # memories merged away (archived, superseded by their merged memory)
    merged_into: int = 0  # merged memories written
    archived: int = 0  # memories archived for low importance
    rescored: int = 0
    pinned_kept: int = 0  # pinned memories that would otherwise have been merged or archived
    skipped: int = 0  # steps skipped because a memory changed while consolidating
    over_max: int = 0  # steps left for a later run by max_changes
    elapsed_ms: float = 0.0
    merge_provider: str = "deterministic"
    warnings: list[str] = field(default_factory=list)
    merges: list[MergeStep] = field(default_factory=list)
    archives: list[ArchiveStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = {
            name: getattr(self, name)
            for name in (
                "project", "dry_run", "threshold", "similarity", "processed", "merged",
                "merged_into", "archived", "rescored", "pinned_kept", "skipped", "over_max",
                "merge_provider", "warnings",
            )
        }  # fmt: skip
        data["elapsed_ms"] = round(self.elapsed_ms, 1)
        data["merges"] = [m.to_dict() for m in self.merges]
        data["archives"] = [a.to_dict() for a in self.archives]
        return data

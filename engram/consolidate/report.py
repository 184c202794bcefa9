"""What a consolidation did (or, with ``--dry-run``, would do): one shape on every face.

The store builds these (:meth:`engram.store.consolidation.ConsolidationMixin.consolidate`) and
every face serves them as they are: the HTTP API answers with these very Structs (its
``/schema`` is built from them), the CLI's ``--json`` and MCP ``mem_consolidate`` are their
``to_dict``. Figures are rounded where they are set (similarity to 3 places, ``elapsed_ms`` to
one), so every face shows the same numbers.
"""

from __future__ import annotations

from engram.store.models import Model


class ReportedMemory(Model):
    """A memory named in a report: local id (this machine), sync id, title, importance."""

    id: int
    sync_id: str
    title: str
    importance: float


class MergeStep(Model):
    """Near-duplicates merged into one memory (``merged.id`` is 0 in a dry run)."""

    merged: ReportedMemory
    sources: list[ReportedMemory]
    project: str
    status: str  # planned | merged | skipped (a source changed meanwhile) | over_max
    similarity: float  # the lowest similarity between two of its sources


class ArchiveStep(Model):
    """A memory archived for its importance being below the threshold."""

    memory: ReportedMemory
    project: str
    status: str  # planned | archived | skipped | over_max


class ConsolidationReport(Model, kw_only=True):
    """Counts first (the first seed's processed/merged/archived/rescored), then every step.
    Every field is always written (the schema requires them all): :meth:`start` gives the
    empty report a consolidation fills in."""

    project: str | None
    dry_run: bool
    threshold: float
    similarity: float
    processed: int  # live memories examined
    merged: int  # memories merged away (archived, superseded by their merged memory)
    merged_into: int  # merged memories written
    archived: int  # memories archived for low importance
    rescored: int
    pinned_kept: int  # pinned memories that would otherwise have been merged or archived
    skipped: int  # steps skipped because a memory changed while consolidating
    over_max: int  # steps left for a later run by max_changes
    merge_provider: str
    warnings: list[str]
    elapsed_ms: float
    merges: list[MergeStep]
    archives: list[ArchiveStep]

    @classmethod
    def start(
        cls, project: str | None, *, dry_run: bool, threshold: float, similarity: float
    ) -> ConsolidationReport:
        """Nothing done yet, by the deterministic merge."""
        return cls(
            project=project, dry_run=dry_run, threshold=threshold, similarity=similarity,
            processed=0, merged=0, merged_into=0, archived=0, rescored=0, pinned_kept=0,
            skipped=0, over_max=0, merge_provider="deterministic", warnings=[], elapsed_ms=0.0,
            merges=[], archives=[],
        )  # fmt: skip

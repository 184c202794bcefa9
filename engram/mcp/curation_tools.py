"""The curation tools (docs/importance.md): ``mem_pin``, ``mem_unpin``, ``mem_review``,
``mem_restore`` and ``mem_consolidate`` — shells over the store's curation and consolidation
methods, with the same envelope as every other tool (:mod:`engram.mcp.tools`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, Field

from engram import formatting
from engram.errors import ValidationError
from engram.mcp.tools import (
    IgnoredProjectArg,
    MemoryId,
    MemoryTools,
    ProjectArg,
    ToolResult,
    envelope,
    said,
)
from engram.store.models import Observation

#: What ``mem_consolidate`` changes at most per call unless told otherwise (the first seed's
#: ``max_entities`` default): an agent's call never rewrites a whole store at once.
CONSOLIDATE_DEFAULT_MAX = 100


def _pin_result(obs: Observation) -> dict[str, object]:
    """The Go tool's pin answer, plus the memory's importance."""
    return {
        "result": f"Memory #{obs.id} {'pinned' if obs.pinned else 'unpinned'}",
        "id": obs.id,
        "sync_id": obs.sync_id,
        "pinned": obs.pinned,
        "importance": obs.importance,
    }


class CurationTools(MemoryTools):
    """Every ``mem_*`` tool: the memory tools plus pins, review, restore and consolidation."""

    def mem_pin(self, id: MemoryId) -> ToolResult:
        """Pin a memory that must never be forgotten (a rule of the project, a hard-won
        gotcha): it is listed first in every mem_context and consolidation never archives it.
        The pin syncs with the memory."""
        resolved = self.workspace.resolve(None, write=True)
        obs = self.store.pin_observation(id, True)
        return envelope(resolved, _pin_result(obs), data=obs.to_dict())  # as engram pin --json

    def mem_unpin(self, id: MemoryId) -> ToolResult:
        """Unpin a memory (it stays; it is just no longer always in mem_context)."""
        resolved = self.workspace.resolve(None, write=True)
        obs = self.store.pin_observation(id, False)
        return envelope(resolved, _pin_result(obs), data=obs.to_dict())

    def mem_review(
        self,
        action: Annotated[
            Literal["list", "mark_reviewed"],
            Field(
                **said(
                    "'list' the memories due for review, or 'mark_reviewed' one",
                    "list, or mark_reviewed one",
                )
            ),
        ] = "list",
        project: ProjectArg = None,
        limit: Annotated[
            int, Field(ge=1, le=100, **said("how many (default 10)", "how many"))
        ] = 10,
        observation_id: Annotated[
            int | None,
            Field(
                ge=1,
                **said("the memory to mark as still right (mark_reviewed)", "for mark_reviewed"),
                validation_alias=AliasChoices("observation_id", "id"),
            ),
        ] = None,
        days: Annotated[
            int | None,
            Field(
                ge=1, le=36500, **said("idle for at least this many days (default 90)", "idle days")
            ),
        ] = None,
    ) -> ToolResult:
        """Memories nobody changed, confirmed or read for a long time may be stale: 'list'
        them, check each against the code, then 'mark_reviewed' the ones still right (or
        mem_update / mem_delete the others)."""
        if action == "mark_reviewed":
            if observation_id is None:
                raise ValidationError(
                    "mark_reviewed needs observation_id: the #id of the memory that is still right",
                    field="observation_id",
                )
            resolved = self.workspace.resolve(None, write=True)
            obs = self.store.mark_reviewed(observation_id)
            return envelope(
                resolved,
                f"Memory #{obs.id} marked reviewed ({obs.reviewed_at})",
                data=obs.to_dict(),
            )
        resolved = self.workspace.resolve(project, write=False)
        span = days if days is not None else self.store.config.review_after_days
        found = self.store.needs_review(resolved.project or None, days=span, limit=limit)
        return envelope(
            resolved, formatting.review_list(found, span), data=[o.to_dict() for o in found]
        )

    def mem_restore(self, id: MemoryId) -> ToolResult:
        """Bring back an archived or soft-deleted memory (consolidation archives, mem_delete
        soft-deletes by default; nothing is ever silently lost): it is live again here and,
        through sync, everywhere. A hard delete cannot be undone."""
        resolved = self.workspace.resolve(None, write=True)
        obs = self.store.restore_observation(id)
        return envelope(
            resolved,
            f"Memory #{obs.id} restored: {formatting.quoted(obs.title)}",
            data=obs.to_dict(),  # as engram restore --json
        )

    def mem_consolidate(
        self,
        dry_run: Annotated[
            bool, Field(description="show what would change and change nothing")
        ] = False,
        max_changes: Annotated[
            int,
            Field(
                ge=1,
                le=100_000,
                description=f"change at most this many memories (default "
                f"{CONSOLIDATE_DEFAULT_MAX})",
                validation_alias=AliasChoices("max_changes", "max", "max_entities"),
            ),
        ] = CONSOLIDATE_DEFAULT_MAX,
        threshold: Annotated[
            float | None,
            Field(ge=0, le=1, description="archive below this importance (default 0.1)"),
        ] = None,
        project: IgnoredProjectArg = None,
    ) -> ToolResult:
        """Tidy this project's memories: merge near-duplicates into one memory that keeps
        every distinct fact, archive unpinned memories of very low importance, re-score the
        rest. Every change syncs and archived memories can be restored (mem_restore). Run it
        with dry_run first and tell the user what it plans."""
        # A write tool: this directory's project, whatever `project` says (docs/mcp.md).
        resolved, extra = self.workspace.resolve_write(project)
        report = self.store.consolidate(
            resolved.project,
            dry_run=dry_run,
            max_changes=max_changes,
            threshold=threshold,
        )
        return envelope(resolved, report.to_dict(), **extra)

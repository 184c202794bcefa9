"""The "memory from previous sessions" text an agent reads at the start of a session."""

from __future__ import annotations

from engram.errors import ValidationError
from engram.store.base import StoreBase
from engram.text import cut_utf8, plural, preview

TRUNCATED_MARKER = "\n[truncated]"


def _section_limit(value: int | None, default: int) -> int:
    """0/None → default; >0 → that many (≤ 500); <0 → omit the section."""
    if value is None or value == 0:
        return default
    return -1 if value < 0 else min(int(value), 500)


class ContextMixin(StoreBase):
    def context(
        self,
        project: str | None = None,
        scope: str | None = None,
        *,
        max_bytes: int | None = None,
        sessions: int | None = None,
        observations: int | None = None,
        prompts: int | None = None,
        compact: bool = False,
        pinned: int | None = None,
    ) -> str:
        """Pinned memories, then recent sessions, prompts and observations as markdown ('' when
        there is nothing).

        ``max_bytes`` caps the UTF-8 size of the text, cutting cleanly and marking the cut
        (pinned memories come first, so they are the last to be cut).
        """
        if max_bytes is not None and int(max_bytes) < 1:
            raise ValidationError("max_bytes must be a positive integer", field="max_bytes")
        n_sessions = _section_limit(sessions, 5)
        n_observations = _section_limit(observations, self.config.max_context_results)
        n_prompts = _section_limit(prompts, 10)
        n_pinned = _section_limit(pinned, self.config.pinned_context_limit)
        pins = (
            self.pinned_observations(project, scope=scope, limit=n_pinned + 1)
            if n_pinned > 0
            else []
        )
        more_pins = len(pins) > n_pinned
        pins = pins[:n_pinned]
        recent_sessions = self.recent_sessions(project, n_sessions) if n_sessions > 0 else []
        recent_prompts = self.recent_prompts(project, n_prompts) if n_prompts > 0 else []
        recent_observations = (
            self.recent_observations(project, scope, n_observations) if n_observations > 0 else []
        )
        if not (pins or recent_sessions or recent_prompts or recent_observations):
            return ""
        lines = ["## Memory from Previous Sessions", ""]
        if pins:
            lines.append("### Pinned")
            for o in pins:
                body = "" if compact else f": {preview(' '.join(o.content.split()), 300)}"
                lines.append(f"- [{o.type}] **{o.title}**{body}")
            if more_pins:
                lines.append(f"- … more pinned memories (at most {n_pinned} are shown here)")
            lines.append("")
        shown = {o.id for o in pins}
        recent_observations = [o for o in recent_observations if o.id not in shown]
        if recent_sessions:
            lines.append("### Recent Sessions")
            for s in recent_sessions:
                summary = "" if compact or not s.summary else f": {preview(s.summary, 200)}"
                lines.append(
                    f"- **{s.project or '(no project)'}** ({s.started_at}){summary} "
                    f"[{plural(s.observation_count or 0, 'observation')}]"
                )
            lines.append("")
        if recent_prompts:
            lines.append("### Recent User Prompts")
            for p in recent_prompts:
                lines.append(f"- {p.created_at}: {preview(' '.join(p.content.split()), 200)}")
            lines.append("")
        if recent_observations:
            lines.append("### Recent Observations")
            for o in recent_observations:
                body = "" if compact else f": {preview(' '.join(o.content.split()), 300)}"
                lines.append(f"- [{o.type}] **{o.title}**{body}")
            lines.append("")
        text = "\n".join(lines) + "\n"
        if max_bytes is not None and len(text.encode()) > int(max_bytes):
            room = max(0, int(max_bytes) - len(TRUNCATED_MARKER.encode()))
            text = cut_utf8(text, room) + TRUNCATED_MARKER
        return text

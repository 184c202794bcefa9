"""Human-readable text for store results, shared by the CLI and the MCP tools so both faces
say the same thing the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engram.store.models import (
    ApplyResult,
    History,
    MemoryRelations,
    Observation,
    Relation,
    SaveResult,
    SearchMatch,
    Stats,
    Timeline,
)
from engram.text import plural

if TYPE_CHECKING:
    from engram.consolidate.report import ConsolidationReport
    from engram.graph.answers import EntityRelationships, GraphAnswer
    from engram.store.vectors import VectorCoverage, VectorizeResult


def cut_bytes(text: str, limit: int) -> str:
    """First ``limit`` bytes (never mid-character) plus ``...`` when cut."""
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode(errors="ignore") + "..."


def quoted(text: str) -> str:
    """Double-quoted with backslash escapes, like Go's %q for the texts agents already know."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def save_result(result: SaveResult) -> str:
    obs = result.observation
    verb = {
        "created": "Memory saved",
        "deduplicated": "Memory already saved (duplicate counted)",
        "topic_updated": "Memory updated (same topic)",
    }.get(result.action, "Memory saved")
    lines = [f"{verb}: #{obs.id} {quoted(obs.title)} ({obs.type})"]
    if result.suggested_topic_key:
        lines.append(f"Suggested topic_key: {result.suggested_topic_key}")
    lines.extend(result.warnings)
    lines.append(importance_label(obs).capitalize())
    return "\n".join(lines)


CUT_PREVIEW_HINT = "Previews are cut: fetch a memory's full text by its #id."


def search_results(
    query: str,
    results: Sequence[Observation],
    preview_bytes: int = 300,
    cut_hint: str = CUT_PREVIEW_HINT,
) -> str:
    """Numbered results with previews; ``cut_hint`` ends the text when a preview was cut."""
    if not results:
        return f"No memories found for: {quoted(query)}"
    lines = [f"Found {plural(len(results), 'memory')}:", ""]
    cut_any = False
    for i, obs in enumerate(results, 1):
        body = " ".join(obs.content.split())
        short = cut_bytes(body, preview_bytes)
        cut_any = cut_any or short != body
        where = f" | project: {obs.project}" if obs.project else ""
        gone = f" [{gone_word(obs)} {obs.deleted_at}]" if obs.deleted_at else ""
        found = f" | found by: {found_by(obs)}" if obs.found_by else ""
        lines += [
            f"[{i}] #{obs.id} ({obs.type}) — {obs.title}{gone}",
            f"    {short}",
            f"    {obs.created_at}{where} | scope: {obs.scope}{found} | {importance_label(obs)}",
        ]
        if obs.match is not None:
            lines.append(f"    {match_line(obs.match)}")
        lines.extend(f"    ↳ {note['note']}" for note in obs.relations or [])
        lines.append("")
    if cut_any:
        lines.append(cut_hint)
    return "\n".join(lines).rstrip() + "\n"


def memory_page(found: Sequence[Observation], total: int, offset: int = 0) -> str:
    """A page of memories, newest first: one line each, then where it came from."""
    if not found:
        return "No memories." if total == 0 else f"No memories past the first {total}."
    lines = [f"Memories {offset + 1}–{offset + len(found)} of {total}:", ""]
    for obs in found:
        gone = f" [{gone_word(obs)} {obs.deleted_at}]" if obs.deleted_at else ""
        where = f" | project: {obs.project}" if obs.project else ""
        lines += [
            f"#{obs.id} ({obs.type}) — {obs.title}{gone}",
            f"    {obs.created_at}{where} | scope: {obs.scope}",
        ]
    return "\n".join(lines)


def machine(origin: str, here: bool) -> str:
    """Who wrote a version: this machine, or another by its origin (short)."""
    return "this machine" if here else (f"machine {origin[:8]}" if origin else "an older import")


def history(h: History) -> str:
    """A memory as it is now, then each earlier version (newest first), indented."""
    obs = h.observation
    count = len(h.revisions)
    lines = [
        f"#{obs.id} [{obs.type}] {obs.title}",
        f"Now: updated {obs.updated_at} on {machine(h.origin, h.written_here)}"
        + (f" ({gone_word(obs)} {obs.deleted_at})" if obs.deleted_at else ""),
        *("    " + line for line in obs.content.splitlines() or [""]),
    ]
    if not count:
        lines += ["", "No earlier versions kept on this machine."]
        return "\n".join(lines)
    lines += ["", f"{plural(count, 'earlier version')}, newest first:"]
    for n, rev in enumerate(h.revisions, 1):
        lines += [
            "",
            f"[{n}] updated {rev.updated_at} on {machine(rev.origin, rev.written_here)}; "
            f"replaced {rev.replaced_at} by {machine(rev.replaced_by_origin, rev.replaced_here)}",
        ]
        if rev.title != obs.title:
            lines.append(f"    title: {rev.title}")
        if rev.type != obs.type:
            lines.append(f"    type: {rev.type}")
        if rev.topic_key != obs.topic_key:
            lines.append(f"    topic: {rev.topic_key or '(none)'}")
        lines += ["    " + line for line in rev.content.splitlines() or [""]]
    return "\n".join(lines)


def superseded(applied: ApplyResult) -> list[str]:
    """One line per memory whose edit made here was replaced by another machine's newer one
    (both stay readable in the memory's history)."""
    return [
        f"Your edit of #{s['id']} {quoted(str(s['title']))} was replaced by a newer edit from "
        f"machine {str(s['by'])[:8]}"
        + (f" (now {quoted(str(s['new_title']))})" if s.get("new_title") != s["title"] else "")
        + f": engram history {s['id']} shows both"
        for s in applied.superseded
    ]


VIA_CONTEXT = "via session context"


def match_line(match: SearchMatch) -> str:
    """Why a result matched, in one line: "matched: postgres, auth (prefix)", "matched: topic
    key", or, when only the session context held a query word, "via session context: login"."""
    if match.tier == "topic":
        return "matched: topic key"
    words = [*match.words, *(f"{w} (prefix)" for w in match.prefix_words)]
    if match.via_context or not words:
        return f"{VIA_CONTEXT}: {', '.join(match.context_words)}".rstrip(": ")
    line = f"matched: {', '.join(words)}"
    if match.context_words:
        line += f" (+ session context: {', '.join(match.context_words)})"
    return line


def content_blocks(content: str) -> str:
    """A memory's content with its What/Why/Where/Learned blocks one per paragraph (the rule the
    TUI and the dashboard use too); content without labels is returned as it is."""
    from engram.text import split_blocks

    blocks = split_blocks(content)
    if not any(block.label for block in blocks):
        return content
    return "\n".join(
        f"{block.label}: {block.text}" if block.label else block.text for block in blocks
    )


def observation(
    obs: Observation, *, blocks: bool = False, relations: MemoryRelations | None = None
) -> str:
    """One memory in full; ``blocks`` lays its content out by What/Why/Where/Learned (for people;
    agents get the content as saved); ``relations`` adds what links it to other memories."""
    content = content_blocks(obs.content) if blocks else obs.content
    lines = [f"#{obs.id} [{obs.type}] {obs.title}", content, f"Session: {obs.session_id}"]
    if obs.project:
        lines.append(f"Project: {obs.project}")
    lines.append(f"Scope: {obs.scope}")
    if obs.topic_key:
        lines.append(f"Topic: {obs.topic_key}")
    if obs.tool_name:
        lines.append(f"Tool: {obs.tool_name}")
    lines += [
        f"Duplicates: {obs.duplicate_count}",
        f"Revisions: {obs.revision_count}",
        f"Created: {obs.created_at}",
        f"Updated: {obs.updated_at}",
        f"Sync id: {obs.sync_id}",
        *intent_lines(obs),
    ]
    if relations is not None:
        lines += relation_lines(relations)
    return "\n".join(lines)


def relation_lines(found: MemoryRelations) -> list[str]:
    """A memory's review state and relations, one line each (``supersedes #12 (…)``)."""
    lines = []
    if found.needs_review:
        lines.append("Review: needs review (a pending conflict; judge it with its relation id)")
    if found.relations:
        lines.append("Relations:")
        for rel in found.relations:
            lines.append(f"  {rel.note(found.sync_id)}  [{rel.sync_id}]")
    return lines


def relation(rel: Relation) -> str:
    """One relation: its id, what it says and its state."""
    who = [f"#{end.id}" if end.id is not None else end.sync_id for end in (rel.source, rel.target)]
    line = f"Relation {rel.sync_id}: {who[0]} {rel.relation} {who[1]} ({rel.state})"
    if rel.reason:
        line += f"\nReason: {rel.reason}"
    return line


def graph_answer(answer: GraphAnswer) -> str:
    """A graph query's triples, grouped by the chain they belong to, with their sources."""
    if not answer.triples:
        names = ", ".join(e.name for e in answer.entities) or "nothing the graph knows"
        text = f"No relationships found for {quoted(answer.question)} (named: {names})."
    else:
        names = " and ".join(e.name for e in answer.entities)
        head = f"What connects {names}:" if answer.connected else "Relationships found:"
        lines = [head]
        for t in answer.triples:
            sources = ", ".join(f"#{s.id} {quoted(cut_bytes(s.title, 60))}" for s in t.sources)
            lines.append(
                f"  {t.subject} —{t.predicate}→ {t.object}  ({t.weight:.2f}) from {sources}"
            )
        text = "\n".join(lines)
    if answer.not_ingested:
        text += (
            f"\n({answer.not_ingested} memories are not in the graph yet: "
            "engram graph ingest adds them)"
        )
    return text


def graph_relationships(found: EntityRelationships) -> str:
    if not found.relationships:
        return f"No entity {quoted(found.entity)} in the graph."
    lines = [f"{found.entity} ({found.kind}):"]
    for r in found.relationships:
        arrow = (
            f"—{r.predicate}→ {r.target}"
            if r.direction == "out"
            else (f"←{r.predicate}— {r.target}")
        )
        lines.append(f"  {arrow}  ({r.weight:.2f}) from #{r.source.id}")
    return "\n".join(lines)


def gone_word(obs: Observation) -> str:
    """How a memory that is not live went: ``archived`` (consolidation, by hand) or
    ``deleted``."""
    return "archived" if obs.delete_reason == "archived" else "deleted"


def importance_label(obs: Observation) -> str:
    """``importance: 0.42`` (``, set by hand`` for an override), ``| pinned`` when pinned."""
    how = ", set by hand" if obs.importance_override is not None else ""
    pin = " | pinned" if obs.pinned else ""
    return f"importance: {obs.importance:.2f}{how}{pin}"


def intent_lines(obs: Observation) -> list[str]:
    """What a person needs to know about a memory's importance, pin, validity and archive."""
    source = "set by hand" if obs.importance_override is not None else "computed"
    lines = [f"Importance: {obs.importance:.2f} ({source})"]
    if obs.pinned:
        lines.append("Pinned: yes")
    lines.append(
        f"Accessed: {obs.access_count} time{'' if obs.access_count == 1 else 's'}"
        + (f" (last {obs.last_accessed_at})" if obs.last_accessed_at else "")
    )
    if obs.valid_from or obs.valid_to:
        lines.append(
            f"Valid: from {obs.valid_from or obs.created_at}"
            + (f" to {obs.valid_to}" if obs.valid_to else " (still true)")
        )
    if obs.reviewed_at:
        lines.append(f"Reviewed: {obs.reviewed_at}")
    if obs.deleted_at:
        lines.append(
            f"{gone_word(obs).capitalize()}: {obs.deleted_at} "
            f"(engram restore {obs.id} brings it back)"
        )
    if obs.superseded_by:
        lines.append(f"Superseded by: {obs.superseded_by}")
    return lines


def consolidation(report: ConsolidationReport) -> str:
    """What a consolidation did (or would do), then each merge and archive."""
    verb = "Would" if report.dry_run else "Did"
    where = f"project {quoted(report.project)}" if report.project else "every project"
    lines = [
        f"Consolidation of {where}{' (dry run: nothing was changed)' if report.dry_run else ''}",
        f"- Examined: {plural(report.processed, 'memory')} (re-scored {report.rescored})",
        f"- {verb} merge: {plural(report.merged, 'near-duplicate')} into "
        f"{plural(report.merged_into, 'memory')}",
        f"- {verb} archive: {report.archived} below importance {report.threshold:g}",
    ]
    if report.pinned_kept:
        lines.append(
            f"- Kept {report.pinned_kept} pinned below the threshold (pins are never archived)"
        )
    if report.skipped:
        lines.append(f"- Skipped {report.skipped} that changed meanwhile (run it again)")
    if report.over_max:
        lines.append(f"- Left {plural(report.over_max, 'step')} for a later run (--max)")
    lines += [f"- Warning: {w}" for w in report.warnings]
    lines.append(f"- Took {report.elapsed_ms / 1000:.2f} s")
    for step in report.merges:
        if step.status in ("over_max", "skipped"):
            continue
        into = f"#{step.merged.id} " if step.merged.id else ""
        lines += ["", f"Merge into {into}{quoted(step.merged.title)} ({step.merged.sync_id}):"]
        lines += [f"  - #{s.id} {quoted(s.title)}" for s in step.sources]
    archives = [a for a in report.archives if a.status in ("planned", "archived")]
    if archives:
        lines += ["", "Archive (restore any with engram restore ID):"]
        lines += [
            f"  - #{a.memory.id} {quoted(a.memory.title)} (importance {a.memory.importance:.2f})"
            for a in archives
        ]
    return "\n".join(lines)


def review_list(memories: Sequence[Observation], days: int) -> str:
    """Memories nobody changed, confirmed or read for ``days`` days."""
    if not memories:
        return f"Nothing to review: every memory was changed, confirmed or read in the last {days} days."
    lines = [f"{len(memories)} {'memory needs' if len(memories) == 1 else 'memories need'} review "
             f"(untouched and unread for {days}+ days):", ""]  # fmt: skip
    for obs in memories:
        last = max(obs.updated_at, obs.reviewed_at or "", obs.last_accessed_at or "")
        where = f" | project: {obs.project}" if obs.project else ""
        lines.append(f"#{obs.id} ({obs.type}) — {obs.title}")
        lines.append(f"    last changed, confirmed or read {last}{where} | {importance_label(obs)}")
    lines += ["", "Still right? engram review --mark ID. Obsolete? engram archive ID."]
    return "\n".join(lines)


def memory_list(memories: Sequence[Observation], empty: str) -> str:
    """One line per memory (archived, pinned lists)."""
    if not memories:
        return empty
    return "\n".join(
        f"#{o.id} ({o.type}) — {o.title} | {o.project or '(no project)'} | {importance_label(o)}"
        + (f" | archived {o.deleted_at}" if o.deleted_at else "")
        for o in memories
    )


def timeline(tl: Timeline) -> str:
    lines: list[str] = []
    if tl.session_info is not None:
        head = (
            f"Session: {tl.session_info.project or '(no project)'} ({tl.session_info.started_at})"
        )
        if tl.session_info.summary:
            head += f" — {cut_bytes(tl.session_info.summary, 100)}"
        lines.append(head)
    lines += [f"Total observations in session: {tl.total_in_range}", "", "─── Before ───"]
    for e in tl.before:
        lines.append(
            f"  #{e.id} [{e.type}] {e.title} — {cut_bytes(' '.join(e.content.split()), 150)}"
        )
    if not tl.before:
        lines.append("  (none)")
    focus = tl.focus
    lines += [
        "",
        f">>> #{focus.id} [{focus.type}] {focus.title} <<<",
        *("    " + line for line in cut_bytes(focus.content, 500).splitlines() or [""]),
        f"    {focus.created_at}",
        "",
        "─── After ───",
    ]
    for e in tl.after:
        lines.append(
            f"  #{e.id} [{e.type}] {e.title} — {cut_bytes(' '.join(e.content.split()), 150)}"
        )
    if not tl.after:
        lines.append("  (none)")
    return "\n".join(lines)


def found_by(obs: Observation) -> str:
    """Which signals found a search result: "words", "meaning (0.62)", or both."""
    parts = []
    if "lexical" in (obs.found_by or ()):
        parts.append("words")
    if "semantic" in (obs.found_by or ()):
        parts.append("meaning")
    text = " + ".join(parts) or "ranking"
    if obs.similarity is not None:
        text += f" (similarity {obs.similarity:.2f})"
    return text


def vector_coverage(vectors: VectorCoverage) -> str:
    """One line: how many memories semantic search can see, or how to enable it."""
    if not vectors.available:
        from engram.semantic import ENABLE_HINT

        return f"off ({ENABLE_HINT})"
    share = 100 * vectors.vectorized / vectors.memories if vectors.memories else 100.0
    text = f"{vectors.vectorized:,} of {vectors.memories:,} memories have vectors ({share:.0f}%)"
    if vectors.missing:
        text += "; 'engram vectorize' embeds the rest now (searches catch up on their own)"
    return text


def stats(st: Stats, database: str | None = None, vectors: VectorCoverage | None = None) -> str:
    lines = [
        "Engram Memory Stats",
        f"- Sessions: {st.total_sessions}",
        f"- Observations: {st.total_observations}",
        f"- Prompts: {st.total_prompts}",
        f"- Projects: {', '.join(st.projects) if st.projects else 'none yet'}",
    ]
    if vectors is not None:
        lines.append(f"- Semantic search: {vector_coverage(vectors)}")
    if database:
        lines.append(f"- Database: {database}")
    return "\n".join(lines)


def vectorize_result(result: VectorizeResult, vectors: VectorCoverage) -> str:
    rate = f" ({result.embedded / result.seconds:,.0f} per second)" if result.seconds > 0 else ""
    lines = [f"Embedded {result.embedded:,} memories in {result.seconds:.1f} s{rate}."]
    if result.skipped:
        lines.append(
            f"{result.skipped:,} changed while being embedded; the next run or search takes them."
        )
    lines.append(f"Semantic search: {vector_coverage(vectors)}")
    return "\n".join(lines)


def context_footer(st: Stats) -> str:
    projects = ", ".join(st.projects) if st.projects else "none"
    return (
        f"\n---\nMemory stats: {st.total_sessions} sessions, {st.total_observations} "
        f"observations across projects: {projects}"
    )

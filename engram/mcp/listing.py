"""What ``tools/list`` says of each tool: the full listing (``engram mcp --tools all``) or the
compact one every agent pays for in its context at the start of each session (issue 17: the
default agent profile stays under 12 KB, tests/mcp/test_listing_and_data.py measures it).

The compact listing gives a short description per tool and per argument (each argument's short
words are declared beside its full ones, :func:`engram.mcp.tools.said`), input schemas without
pydantic's generated titles, ``X | None`` written as an optional ``X``, no defaults that say
nothing (null, false, ""), only the hints that differ from what MCP assumes when a hint is
absent, and no output schemas (results still carry their structured content). What a call
accepts does not change: arguments are validated against the full models either way.
"""

from __future__ import annotations

from typing import Any

from mcp_types import ToolAnnotations

from engram.mcp.tools import COMPACT

#: What the compact listing says of each tool: when to call it, in a sentence or two (the full
#: docstrings, listed with --tools all, say more).
SHORT_DESCRIPTIONS: dict[str, str] = {
    "mem_save": "Save a memory right after a bugfix, decision, discovery, tricky config, pattern "
    "or user preference; don't wait to be asked. Content: **What** / **Why** / **Where** / "
    "**Learned**. Reusing a topic_key updates that memory.",
    "mem_search": "Search memories (best first) before re-investigating anything. Results are "
    "previews with #ids: mem_get_observation gives the full text.",
    "mem_context": "Recent sessions, prompts and memories of this project: call it first in "
    "every session and after a context reset.",
    "mem_session_summary": "Save the end-of-session summary: mandatory before ending or a "
    "context reset.",
    "mem_session_start": "Start a session: saves without a session_id join it.",
    "mem_session_end": "End a session (save its summary with mem_session_summary first).",
    "mem_get_observation": "One memory in full by #id; include_history adds its earlier versions.",
    "mem_suggest_topic_key": "Propose a stable topic_key (family/subject) for an evolving subject.",
    "mem_capture_passive": "Save each item of a '## Key Learnings:' list in the text as its "
    "own memory.",
    "mem_save_prompt": "Record the user's request when its intent is worth keeping.",
    "mem_update": "Correct or extend a memory in place (give only the fields that change).",
    "mem_current_project": "Which project saves go to and why, and the projects that exist.",
    "mem_list_projects": "Every project with its counts.",
    "mem_delete": "Delete a wrong or obsolete memory (soft by default: mem_restore undoes it).",
    "mem_restore": "Bring back an archived or soft-deleted memory.",
    "mem_review": "List memories due for review (idle a long time), or mark_reviewed one that "
    "is still right.",
    "mem_pin": "Pin a memory that must never be forgotten: always in mem_context, never archived.",
    "mem_unpin": "Unpin a memory (it stays).",
    "mem_consolidate": "Merge near-duplicates and archive trivia of this project (dry_run first).",
    "mem_stats": "How many sessions, memories and prompts are stored.",
    "mem_timeline": "The memories saved before and after one, in its session.",
    "mem_merge_projects": "Move every memory of some projects into another.",
    "mem_ingest_git": "One memory per recent change set of the git repository (safe to repeat).",
    "mem_summarize": "Extract learnings from recent memories and commits, saved as memories.",
    "mem_relate": "Link two memories of one project: supersedes (newer replaces older), "
    "conflicts_with (they disagree), related, compatible, scoped, not_conflict.",
    "mem_relations": "A memory's relations to other memories and whether it needs review.",
    "mem_judge": "Settle a relation (typically a detected conflict): give the verdict, or "
    "status ignored to dismiss it.",
    "mem_graph_query": "Ask the graph of what memories name (files, modules, services…): "
    "triples connecting the entities the question names, with their memories.",
    "mem_graph_ingest": "Extract entities and relationships from memories into the graph.",
    "ingestGit": "Alias of mem_ingest_git.",
    "summarize": "Alias of mem_summarize.",
}


def compact_schema(schema: Any) -> Any:
    """An input schema as agents need it: without pydantic's generated ``title`` of every
    property, with ``X | None = None`` written as an optional ``X`` (the server still accepts
    null: the arguments are validated against the full model), each argument described in the
    short words given beside its full ones (:func:`engram.mcp.tools.said`), and no ``maximum``
    beyond what JSON numbers hold exactly (SQLite's largest id: a limit no agent meets)."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact_schema(prop) for name, prop in value.items()}
        elif (
            (key == "title" and isinstance(value, str))
            or key == COMPACT
            or (key == "maximum" and isinstance(value, int) and value > 2**53)
        ):
            continue
        else:
            out[key] = compact_schema(value)
    if isinstance(schema.get(COMPACT), str):
        out["description"] = schema[COMPACT]
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options and len(options) > 1:
        others = [o for o in options if o != {"type": "null"}]
        if len(others) == 1:
            del out["anyOf"]
            out = {**others[0], **out}
        else:
            out["anyOf"] = others
    # An absent argument's default that says nothing (null, false, ""): omitted.
    if "default" in out and (
        out["default"] is None or out["default"] is False or out["default"] == ""
    ):
        del out["default"]
    return out


def full_schema(schema: Any) -> Any:
    """An input schema as the full listing sends it: as generated, without the short words
    kept for the compact one."""
    if isinstance(schema, list):
        return [full_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: full_schema(value) for key, value in schema.items() if key != COMPACT}


def compact_annotations(hints: ToolAnnotations | None) -> ToolAnnotations | None:
    """A tool's hints as the compact listing sends them: only those that differ from what the
    MCP specification assumes when a hint is absent (not read-only, destructive, not
    idempotent, open world), and none of a read-only tool's write hints (they mean nothing
    there); the title is the tool's own already."""
    if hints is None:
        return None
    read_only = bool(hints.read_only_hint)
    return ToolAnnotations(
        read_only_hint=True if read_only else None,
        destructive_hint=False if not read_only and hints.destructive_hint is False else None,
        idempotent_hint=True if not read_only and hints.idempotent_hint else None,
        open_world_hint=False if hints.open_world_hint is False else None,
    )


def compact_tools(tools: list[Any]) -> list[Any]:
    """The default listing: every tool compact (module doc)."""
    return [
        tool.model_copy(
            update={
                "description": SHORT_DESCRIPTIONS.get(tool.name, tool.description),
                "input_schema": compact_schema(tool.input_schema),
                "output_schema": None,
                "annotations": compact_annotations(tool.annotations),
            }
        )
        for tool in tools
    ]


def full_tools(tools: list[Any]) -> list[Any]:
    """The full listing: as the SDK builds it, without the short words."""
    return [
        tool.model_copy(update={"input_schema": full_schema(tool.input_schema)}) for tool in tools
    ]

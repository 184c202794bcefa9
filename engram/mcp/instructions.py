"""The memory protocol: the instructions an agent needs to use Engram's tools well.

``engram protocol`` prints it for an agent's instructions file (CLAUDE.md, AGENTS.md, GEMINI.md…);
the MCP server sends a short form as its ``instructions``. Kept as a module constant so that it
ships inside the package with no data-file configuration.
"""

from __future__ import annotations

PROTOCOL = """\
## Engram persistent memory

You have a persistent memory shared across sessions (and, through sync, with your team): the
`mem_*` tools of the `engram` MCP server. Use it so that nothing learned is learned twice.

### When a session starts
1. Call `mem_context` to read what previous sessions left: recent sessions, prompts, memories.
2. If the user's request touches something that may have been worked on before, `mem_search`
   for it before you start (questions work: "how did we fix the login timeout?").

### Save proactively — do not wait to be asked
Call `mem_save` right after any of these:
- a bug fixed (what broke, the root cause, the fix)
- a decision made, or an architecture / design choice (and the alternatives rejected)
- something non-obvious discovered about the code, a library or the environment
- configuration or setup that was hard to get right
- a pattern or convention established in this codebase
- a preference the user expressed about how they like things done

Write each memory so a stranger could use it months later:
- `title`: short and searchable, e.g. "Fixed N+1 query in the user list".
- `type`: bugfix, decision, architecture, discovery, pattern, config, preference or learning.
- `content`, in four parts:
  **What**: what was done or found, in one or two sentences.
  **Why**: the reason, the problem it solves, what was rejected.
  **Where**: files, functions, commands, URLs concerned.
  **Learned**: the gotcha or insight worth remembering (omit if nothing new).
- `topic_key` for a subject that evolves (an architecture decision, a config): saving again
  with the same key updates that memory instead of adding a new one. `mem_suggest_topic_key`
  proposes one; reuse it on later saves of the same subject.
- One memory per subject. Wrap secrets in `<private>…</private>`: they are never stored.
- Save what the user asked with `mem_save_prompt` when the request itself matters later.

### Finding things
`mem_context` (recent activity) → `mem_search` (words or a question; results show short
previews and #ids) → `mem_get_observation` with an #id for the full text. `mem_timeline` shows
what was saved around a memory in the same session. Fix a memory that turned out wrong with
`mem_update` rather than saving a contradicting one.

### Keeping memory useful
`mem_pin` a memory that must never be forgotten (a rule of the project, a hard-won gotcha): it
is listed first in every `mem_context`. Every memory has an importance (0-1, computed from its
length, topics, links, age and reads); pass `importance` to `mem_save`/`mem_update` only when
you know better. When the user asks to tidy memory, `mem_review` lists memories nobody has
touched for months (check each, then `mark_reviewed`, `mem_update` or `mem_delete`), and
`mem_consolidate` with `dry_run` first shows which near-duplicates it would merge and which
trivia it would archive (archived memories can be brought back with `mem_restore`).

### Before ending a session (mandatory)
Call `mem_session_summary` with this structure:

    ## Goal
    What this session set out to do.
    ## Instructions
    Preferences or constraints the user gave that future sessions must respect.
    ## Discoveries
    - What was learned about the code or the problem.
    ## Accomplished
    - What is done (and verified).
    ## Next Steps
    - What remains, in order.
    ## Relevant Files
    - path/to/file — why it matters

If your final answer contains a `## Key Learnings:` section with a numbered list, also pass
that text to `mem_capture_passive`: each item is saved as its own memory (duplicates skipped).

### After a context reset or compaction
First save a `mem_session_summary` of what happened before the reset, then call `mem_context`
to recover the state, then continue.

### Projects
Memories belong to the project of the directory the server runs in (or `--project` /
`ENGRAM_PROJECT`): saving tools always write there and ignore a `project` argument. Reading
tools take `project` to look at another, existing project; `mem_current_project` and
`mem_list_projects` show what is known. If a read reports `unknown_project`, pick one of the
`available_projects` it lists; if a save reports `ambiguous_project`, the server runs in a
folder of several repositories and must be started inside one (or with `--project`).
"""

INSTRUCTIONS = """\
Engram is your persistent memory across sessions. At the start of a session call mem_context; \
before re-investigating something, mem_search for it (then mem_get_observation for the full \
text). Save with mem_save right after fixing a bug, making a decision, discovering something \
non-obvious, establishing a pattern or learning a user preference — content as **What** / \
**Why** / **Where** / **Learned**, with a topic_key for subjects that evolve. Before the session \
ends, call mem_session_summary (Goal / Instructions / Discoveries / Accomplished / Next Steps / \
Relevant Files). Saves go to the project of the server's working directory (see \
mem_current_project); pass `project` to reading tools only, to look at another existing project."""


BEGIN_MARK = (
    "<!-- engram:protocol (managed by 'engram protocol --install'; edits here are replaced) -->"
)
END_MARK = "<!-- /engram:protocol -->"


def install(text: str | None) -> tuple[str, str]:
    """``(status, new_text)`` for putting the protocol into an instructions file's ``text``:
    ``added`` (appended between markers), ``updated`` (the marked block replaced by today's
    protocol) or ``unchanged`` (already there, marked or pasted by hand)."""
    block = f"{BEGIN_MARK}\n{PROTOCOL.rstrip()}\n{END_MARK}\n"
    text = text or ""
    start = text.find(BEGIN_MARK)
    end = text.find(END_MARK, start + 1) if start >= 0 else -1
    if start >= 0 and end >= 0:
        end += len(END_MARK)
        if end < len(text) and text[end] == "\n":
            end += 1
        new = text[:start] + block + text[end:]
        return ("unchanged" if new == text else "updated"), new
    if PROTOCOL.strip() in text:
        return "unchanged", text
    # One blank line between the user's text and the block, whatever the text ended with.
    separator = "\n\n"[: max(0, 2 - (len(text) - len(text.rstrip("\n"))))] if text else ""
    return "added", text + separator + block

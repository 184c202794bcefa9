"""The ``mem_*`` MCP tools: typed, documented shells over :class:`engram.store.Store`.

Each tool validates what only the MCP face knows about (which project a call means, how big an
argument may be), calls one store method, and returns the envelope
``{"project", "project_source", "project_path", "result"}`` as text; its structured content is
that envelope plus ``data``, the same JSON object ``engram … --json`` prints for that operation
(for ``mem_save`` the memory with its ``id``, ``sync_id`` and ``action``), so a program never
parses the text. Failures are raised as ``engram.errors`` exceptions; ``engram.mcp.server``
turns them into tool errors.

Which project a call means (docs/mcp.md, "Which project a memory goes to"): write tools
(saves, prompts, summaries, passive capture, session start, updates) always use the process
override (``--project`` / ``ENGRAM_PROJECT``), else the server's working directory, and discard a
``project`` argument, so agents cannot drift between names (an agent set up for the Go tool
never fails with ``unknown_project`` on a save). They create a session id they have not seen,
in that project, as the Go tool does. Read tools honour an explicit ``project`` argument, which
must name a known project. A directory holding several repositories is
ambiguous: read tools then look at every project, write tools refuse and write nothing.
Numbers and flags are read as leniently as the Go tool reads them (:mod:`engram.mcp.lenient`).

Size: over 500 lines on purpose: the tools' schemas and handlers, each a thin call into the
store; one file so the agents' contract reads as one list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from mcp_types import CallToolResult, TextContent
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from engram import formatting
from engram.errors import EngramError, NotFoundError, ProjectResolutionError, ValidationError
from engram.mcp.lenient import Truncated, count_or_default, flag_or_default
from engram.project import ProjectResolution, detect_project, normalize_project
from engram.store import Store
from engram.store.checks import unknown_project
from engram.store.db import MAX_INTEGER
from engram.text import strip_private, suggest_topic_key

CONTEXT_DEFAULT_BYTES = 16 * 1024
CONTEXT_MAX_BYTES = 64 * 1024
MAX_TITLE_BYTES = 1000
# Passive capture scans a whole answer for its "Key Learnings" list, so it may be long.
MAX_PASSIVE_BYTES = 1_000_000
SEARCH_CUT_HINT = "Previews are cut: call mem_get_observation with an #id for the full text."


class Envelope(BaseModel):
    """Every successful result: the project the call used, how it was chosen, and the output."""

    model_config = ConfigDict(extra="allow")

    project: str = Field(description="the project the call used ('' = every project)")
    project_source: str = Field(
        description="how it was chosen: explicit_override, process_override, session, "
        "config, git_remote, git_root, git_child, dir_basename, ambiguous, all_projects"
    )
    project_path: str = Field(description="the directory that project was detected from")
    result: str | dict[str, Any] = Field(description="the tool's output")
    data: Any = Field(
        default=None,
        description="the same JSON object `engram ... --json` prints (structured content only)",
    )


#: The return annotation of every tool: a CallToolResult whose structured content is validated
#: against (and advertised as) the envelope's schema.
ToolResult = Annotated[CallToolResult, Envelope]


class ToolFailure(EngramError):
    """A refusal specific to the MCP face, with the machine-readable code agents see."""

    status_code = 409

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Resolved:
    """The project a call uses and where that choice came from."""

    project: str
    source: str
    path: str


def envelope(
    resolved: Resolved, result: str | dict[str, Any], *, data: Any = None, **extra: Any
) -> CallToolResult:
    """The JSON envelope as text; the structured content is the envelope plus ``data`` (what
    the CLI prints with ``--json``), which the text leaves out (an agent reads ``result``)."""
    body: dict[str, Any] = {
        "project": resolved.project,
        "project_source": resolved.source,
        "project_path": resolved.path,
        "result": result,
        **extra,
    }
    text = orjson.dumps(body).decode()
    structured = {**body, "data": result if data is None else data}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def check_size(value: str | None, field: str, limit: int) -> None:
    """Refuse (rather than silently cut) text larger than the store keeps, so nothing is lost."""
    if not value:
        return
    size = len(strip_private(value).encode())
    if size > limit:
        raise ValidationError(
            f"{field} is {size:,} bytes, over the {limit:,}-byte limit; nothing was saved. "
            f"Split it into several memories (one subject each) or summarize it, then retry.",
            field=field,
        )


class Workspace:
    """The server's working directory, the project it means, and the projects a call may name.

    Detection reads files, so its outcome is cached for the life of the process;
    ``mem_current_project`` refreshes it.
    """

    def __init__(self, store: Store, cwd: str, override: str | None = None) -> None:
        self.store = store
        self.cwd = cwd
        self.override = normalize_project(override)[0] if override and override.strip() else ""
        self._detected: ProjectResolution | None = None
        #: Sessions started through this server and not ended yet: session id → project.
        self.live_sessions: dict[str, str] = {}

    def detection(self, *, refresh: bool = False) -> ProjectResolution:
        if self._detected is None or refresh:
            self._detected = detect_project(self.cwd)
        return self._detected

    def _path_for(self, name: str) -> str:
        detected = self.detection()
        return detected.path if detected.project == name else ""

    def default(self) -> Resolved:
        """The project when a call names none: the process override, else the directory's."""
        if self.override:
            return Resolved(self.override, "process_override", self._path_for(self.override))
        detected = self.detection()
        return Resolved(detected.project, detected.source, detected.path)

    def known_projects(self) -> list[str]:
        """Every project a call may name: stored ones, the override, the detected project(s)."""
        names = set(self.store.project_names())
        detected = self.detection()
        names.update(n for n in (self.override, detected.project) if n)
        names.update(detected.available_projects)
        return sorted(names)

    def _is_known(self, name: str) -> bool:
        detected = self.detection()
        if name in (self.override, detected.project) or name in detected.available_projects:
            return True
        return self.store.project_exists(name)

    def resolve(self, explicit: str | None, *, write: bool) -> Resolved:
        """The project of a call: a known explicit name, else :meth:`default`.

        An ambiguous directory fails writes (nothing is written) and gives reads every project.
        """
        if explicit is not None and explicit.strip():
            name = normalize_project(explicit)[0]
            if not self._is_known(name):
                raise self.unknown_project(name)
            return Resolved(name, "explicit_override", self._path_for(name))
        resolved = self.default()
        if write and resolved.source == "ambiguous":
            choices = self.detection().available_projects
            raise ProjectResolutionError(
                f"{self.cwd} holds several repositories, so the project is ambiguous and nothing "
                f"was written. Write tools take the project from the server's directory: start "
                f"it inside one of them, or with --project NAME (one of: {', '.join(choices)}).",
                code="ambiguous_project",
                available_projects=choices,
            )
        return resolved

    def unknown_project(self, name: str) -> ProjectResolutionError:
        """The store's unknown-project error (its did-you-mean), with what to do here."""
        here = self.default().project
        fallback = f' or omit project to use this directory\'s project "{here}"' if here else ""
        return unknown_project(
            name,
            self.known_projects(),
            hint=f"Use one of available_projects{fallback}. Nothing was written.",
        )

    def resolve_write(self, ignored: str | None) -> tuple[Resolved, dict[str, Any]]:
        """The project of a write tool: the process override, else this directory's (an
        ambiguous directory refuses). A ``project`` argument is discarded; when it named
        another project, the envelope says so (``project_ignored``)."""
        resolved = self.resolve(None, write=True)
        extra: dict[str, Any] = {}
        if ignored and ignored.strip() and normalize_project(ignored)[0] != resolved.project:
            extra["project_ignored"] = ignored.strip()
        return resolved, extra

    def write_session(self, project: str, session_id: str | None) -> str | None:
        """The session a write joins: the named one of ``project`` — created when this
        machine has not seen it, as the Go tool does — else the single session of ``project``
        this server started and has not ended."""
        if session_id is None or not session_id.strip():
            return self.open_session(project)
        name = session_id.strip()
        try:
            return self.store.get_session(name, project=project).id
        except NotFoundError:
            return self.store.create_session(name, project, self.cwd).id

    def open_session(self, project: str) -> str | None:
        """The one session of ``project`` this server started and has not ended, if exactly
        one (tracked in memory: asking the database would cost a scan per save)."""
        live = [sid for sid, owner in self.live_sessions.items() if owner == project]
        return live[0] if len(live) == 1 else None


# --- argument types (descriptions are what agents read in the schema) ----------------------

#: The key of an argument's schema that holds what the compact listing says of it instead of
#: its description (engram.mcp.listing.compact_schema; neither listing sends the key itself).
COMPACT = "x-engram-compact"


def said(full: str, short: str) -> dict[str, Any]:
    """``Field`` keywords for an argument described in ``full`` words in the full listing
    (``--tools all``) and in ``short`` ones in the compact default listing."""
    return {"description": full, "json_schema_extra": {COMPACT: short}}


MemoryId = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=MAX_INTEGER,
        **said("the memory's #id (from mem_search or mem_save)", "the memory's #id"),
    ),
    Truncated,
]
ProjectArg = Annotated[
    str | None,
    Field(
        **said(
            "an existing project to use instead of this directory's; omit it normally",
            "another project's name",
        )
    ),
]
#: Write tools accept ``project`` (agents set up for the Go tool send it) and discard it.
IgnoredProjectArg = Annotated[
    str | None,
    Field(
        **said(
            "ignored: writes always go to this directory's project (see mem_current_project); "
            "accepted so agents that send it keep working",
            "ignored: this directory's project",
        )
    ),
]
SessionArg = Annotated[
    str | None,
    Field(
        **said(
            "a session id (one not seen yet is created, in this directory's project); omit "
            "for the session started with mem_session_start",
            "omit normally",
        )
    ),
]
ScopeArg = Literal["project", "personal"]
ImportanceArg = Annotated[
    float | None,
    Field(
        **said(
            "how much it matters, 0-1, when you know better than the computed score (length, "
            "topics, links, recency, reads); omit it normally",
            "0-1, only to overrule the computed score",
        )
    ),
]
TYPE_HELP = "bugfix, decision, architecture, discovery, pattern, config, preference, learning"


class MemoryTools:
    """The tool functions, bound to one store and one workspace."""

    def __init__(self, store: Store, workspace: Workspace) -> None:
        self.store = store
        self.workspace = workspace

    @property
    def max_content(self) -> int:
        return self.store.config.max_observation_length

    # --- saving -----------------------------------------------------------------------------

    def mem_save(
        self,
        title: Annotated[
            str, Field(description="short, searchable: 'Fixed N+1 query in the user list'")
        ],
        content: Annotated[
            str,
            Field(
                **said(
                    "**What**: what was done or found. **Why**: the reason or problem. "
                    "**Where**: files, functions, commands. **Learned**: the gotcha worth keeping.",
                    "**What**: done or found. **Why**. **Where**: files, commands. **Learned**",
                ),
                validation_alias=AliasChoices("content", "observation"),
            ),
        ],
        type: Annotated[str, Field(description=f"kind of memory: {TYPE_HELP}")] = "manual",
        session_id: SessionArg = None,
        project: IgnoredProjectArg = None,
        scope: Annotated[
            ScopeArg, Field(description="'personal' memories never leave this machine")
        ] = "project",
        topic_key: Annotated[
            str | None,
            Field(
                **said(
                    "stable key for a subject that evolves (e.g. architecture/auth): saving with "
                    "the same key updates that memory instead of adding one",
                    "e.g. architecture/auth: the same key updates that memory",
                )
            ),
        ] = None,
        allow_secrets: Annotated[
            bool,
            Field(
                **said(
                    "keep text that looks like a secret; by default API keys, tokens, private "
                    "keys and passwords are saved as [REDACTED:kind]",
                    "keep secrets (default: [REDACTED:kind])",
                )
            ),
        ] = False,
        importance: ImportanceArg = None,
    ) -> ToolResult:
        """Save a memory. Call it right after fixing a bug, making or explaining a decision,
        discovering something non-obvious, getting tricky configuration right, establishing a
        pattern, or learning a user preference — do not wait to be asked. Write the content as
        **What** / **Why** / **Where** / **Learned** so it is useful months later; one subject
        per memory. Reuse a topic_key to update an evolving subject. Text inside
        <private>…</private> is never stored."""
        check_size(title, "title", MAX_TITLE_BYTES)
        check_size(content, "content", self.max_content)
        resolved, extra = self.workspace.resolve_write(project)
        session = self.workspace.write_session(resolved.project, session_id)
        saved = self.store.add_observation(
            title=title,
            content=content,
            type=type,
            session_id=session,
            project=resolved.project,
            scope=scope,
            topic_key=topic_key,
            allow_secrets=allow_secrets,
            importance=importance,
        )
        return envelope(resolved, formatting.save_result(saved), data=saved.to_dict(), **extra)

    def mem_save_prompt(
        self,
        content: Annotated[str, Field(description="what the user asked, in their words")],
        session_id: SessionArg = None,
        project: IgnoredProjectArg = None,
    ) -> ToolResult:
        """Record the user's request, so later sessions know why the work was done. Use it when
        the request itself carries intent worth keeping."""
        check_size(content, "content", self.max_content)
        resolved, extra = self.workspace.resolve_write(project)
        session = self.workspace.write_session(resolved.project, session_id)
        prompt = self.store.add_prompt(content, session_id=session, project=resolved.project)
        shown = formatting.quoted(formatting.cut_bytes(prompt.content, 80))
        return envelope(resolved, f"Prompt saved: {shown}", data=prompt.to_dict(), **extra)

    def mem_session_summary(
        self,
        content: Annotated[
            str,
            Field(
                description="## Goal / ## Instructions / ## Discoveries / ## Accomplished / "
                "## Next Steps / ## Relevant Files"
            ),
        ],
        session_id: SessionArg = None,
        project: IgnoredProjectArg = None,
    ) -> ToolResult:
        """Save the end-of-session summary. Mandatory before a session ends and before a
        context reset: sections Goal, Instructions, Discoveries, Accomplished, Next Steps,
        Relevant Files. The next session reads it through mem_context."""
        check_size(content, "content", self.max_content)
        resolved, extra = self.workspace.resolve_write(project)
        session = self.workspace.write_session(resolved.project, session_id)
        saved = self.store.add_observation(
            title=f"Session summary: {resolved.project or 'no project'}",
            content=content,
            type="session_summary",
            session_id=session,
            project=resolved.project,
        )
        return envelope(
            resolved,
            f"Session summary saved for project {formatting.quoted(resolved.project)}",
            data=saved.to_dict(),
            **extra,
        )

    def mem_capture_passive(
        self,
        content: Annotated[
            str, Field(description="text containing a '## Key Learnings:' numbered list")
        ],
        session_id: SessionArg = None,
        source: Annotated[
            str | None,
            Field(**said("what produced the text (default mcp-passive)", "what produced the text")),
        ] = None,
        project: IgnoredProjectArg = None,
    ) -> ToolResult:
        """Save each item of a '## Key Learnings:' list (numbered or bulleted) found in the text
        as its own memory; items already stored in the project are skipped."""
        check_size(content, "content", MAX_PASSIVE_BYTES)
        resolved, extra = self.workspace.resolve_write(project)
        session = self.workspace.write_session(resolved.project, session_id)
        result = self.store.capture_passive(
            content, session_id=session, project=resolved.project, source=source or "mcp-passive"
        )
        return envelope(
            resolved,
            f"Passive capture complete: extracted={result.extracted} saved={result.saved} "
            f"duplicates={result.duplicates}",
            data=result.to_dict(),
            **extra,
        )

    # --- sessions ---------------------------------------------------------------------------

    def mem_session_start(
        self,
        id: Annotated[str, Field(min_length=1, description="a unique session id of your choice")],
        directory: Annotated[
            str | None,
            Field(**said("the working directory (default: the server's)", "default: the server's")),
        ] = None,
        project: IgnoredProjectArg = None,
    ) -> ToolResult:
        """Start a session: until mem_session_end, memories and prompts saved without a
        session_id attach to it (when it is the only one open). Starting it again is harmless."""
        resolved, extra = self.workspace.resolve_write(project)
        try:
            existing = self.store.get_session(id.strip(), project=resolved.project)
        except NotFoundError:
            existing = None
        if existing is not None and not existing.active:
            raise ToolFailure(
                f'Session "{existing.id}" already ended at {existing.ended_at}; start a new '
                "session with another id.",
                code="session_already_ended",
            )
        session = self.store.create_session(id, resolved.project, directory or self.workspace.cwd)
        self.workspace.live_sessions[session.id] = session.project
        return envelope(
            resolved,
            f"Session {formatting.quoted(session.id)} started for project "
            f"{formatting.quoted(session.project)}",
            data=session.to_dict(),
            **extra,
        )

    def mem_session_end(
        self,
        id: Annotated[str, Field(min_length=1, description="the session to end")],
        summary: Annotated[str | None, Field(description="a one-paragraph summary")] = None,
    ) -> ToolResult:
        """End a session (record the full summary with mem_session_summary first)."""
        check_size(summary, "summary", self.max_content)
        here = self.workspace.default()
        try:
            try:
                # this directory's session of that id first (sessions are per project)
                if here.source == "ambiguous":
                    raise NotFoundError(id)
                session = self.store.end_session(id, summary, project=here.project)
            except NotFoundError:
                session = self.store.end_session(id, summary)
        except NotFoundError:
            raise NotFoundError(
                f'Session "{id.strip()}" not found: it was never started (mem_session_start).'
            ) from None
        self.workspace.live_sessions.pop(session.id, None)
        resolved = Resolved(session.project, "session", session.directory)
        return envelope(
            resolved, f"Session {formatting.quoted(session.id)} completed", data=session.to_dict()
        )

    # --- finding ----------------------------------------------------------------------------

    def mem_search(
        self,
        query: Annotated[
            str, Field(description="words or a question: 'how did we fix the login timeout?'")
        ],
        type: Annotated[
            str | None, Field(**said(f"only this kind: {TYPE_HELP}", "only this kind"))
        ] = None,
        project: ProjectArg = None,
        scope: ScopeArg | None = None,
        limit: Annotated[
            int | None,
            Field(**said("results (default 10, at most 20)", "results (at most 20)")),
            count_or_default(None),
        ] = None,
        all_projects: Annotated[
            bool, Field(**said("search every project, not only this one", "every project"))
        ] = False,
        match_mode: Annotated[
            Literal["any", "all"],
            Field(**said("'any' word (ranked, default) or 'all' words", "any or all words")),
        ] = "any",
        mode: Annotated[
            Literal["lexical", "semantic", "hybrid"] | None,
            Field(
                **said(
                    "'hybrid': words and meaning (the default when semantic search is "
                    "installed), 'semantic': meaning only, 'lexical': words only",
                    "words, meaning or both (default)",
                )
            ),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(
                **said(
                    "answer with what was true then: a date (YYYY-MM-DD) or an ISO 8601 date and "
                    "time; earlier texts of edited memories included",
                    "what was true then: YYYY-MM-DD or ISO 8601",
                )
            ),
        ] = None,
    ) -> ToolResult:
        """Search memories (best first), by words and, where semantic search is installed, by
        meaning: ask in your own words. Use it before re-investigating anything that may have
        been solved before. Results are previews with #ids: call mem_get_observation for the
        full text. A query containing '/' also matches topic keys exactly; importance breaks
        near ties; as_of asks what was true then."""
        if all_projects:
            resolved, where = Resolved("", "all_projects", ""), None
        else:
            resolved = self.workspace.resolve(project, write=False)
            where = resolved.project or None
        results = self.store.search(
            query,
            type=type,
            project=where,
            scope=scope,
            limit=limit,
            match_mode=match_mode,
            mode=mode,
            as_of=as_of,
            check_conflicts=True,  # what was saved just before shows its conflicts
        )
        return envelope(
            resolved,
            formatting.search_results(query, results, cut_hint=SEARCH_CUT_HINT),
            data=[o.to_dict() for o in results],
        )

    def mem_get_observation(
        self,
        id: MemoryId,
        include_history: Annotated[
            bool,
            Field(
                **said("also its earlier versions (kept on this machine)", "with earlier versions")
            ),
            flag_or_default(False),
        ] = False,
    ) -> ToolResult:
        """Get one memory in full (search results only show previews), with its relations to
        other memories (supersedes, contested by …) and whether it needs review;
        include_history adds its earlier versions, newest first."""
        obs = self.store.get_observation(id, record_access=True)
        if include_history:
            found = self.store.history(id)
            return envelope(
                self.workspace.default(), formatting.history(found), data=found.to_dict()
            )
        related = self.store.relations_for(obs.id)
        data = {  # as engram get --json prints it
            **obs.to_dict(),
            "needs_review": related.needs_review,
            "relations": [r.to_dict() for r in related.relations],
        }
        return envelope(
            self.workspace.default(), formatting.observation(obs, relations=related), data=data
        )

    def mem_context(
        self,
        project: ProjectArg = None,
        scope: ScopeArg | None = None,
        compact: Annotated[
            bool, Field(**said("titles only, without content previews", "titles only"))
        ] = False,
        max_bytes: Annotated[
            int | None,
            Field(**said("size cap of the text (default 16384, max 65536)", "text size cap")),
        ] = None,
    ) -> ToolResult:
        """Recent sessions, prompts and memories of the project. Call it at the start of every
        session and after a context reset, before anything else."""
        resolved = self.workspace.resolve(project, write=False)
        size = CONTEXT_DEFAULT_BYTES if max_bytes is None else min(max_bytes, CONTEXT_MAX_BYTES)
        text = self.store.context(resolved.project or None, scope, max_bytes=size, compact=compact)
        data = {"project": resolved.project or None, "context": text}  # as engram context
        if not text:
            return envelope(resolved, "No previous session memories found.", data=data)
        return envelope(resolved, text + formatting.context_footer(self.store.stats()), data=data)

    def mem_timeline(
        self,
        observation_id: MemoryId,
        before: Annotated[
            int, Field(description="memories shown before it"), count_or_default(5, MAX_INTEGER)
        ] = 5,
        after: Annotated[
            int, Field(description="memories shown after it"), count_or_default(5, MAX_INTEGER)
        ] = 5,
        project: Annotated[
            str | None, Field(description="fail unless the memory belongs to this project")
        ] = None,
    ) -> ToolResult:
        """The memories saved just before and after one, in the same session: what led to it and
        what followed."""
        resolved = self.workspace.resolve(project, write=False)
        timeline = self.store.timeline(observation_id, before, after)
        if project is not None and project.strip() and timeline.focus.project != resolved.project:
            raise ToolFailure(
                f'Memory #{observation_id} belongs to project "{timeline.focus.project}", not '
                f'"{resolved.project}".',
                code="project_mismatch",
            )
        return envelope(resolved, formatting.timeline(timeline), data=timeline.to_dict())

    def mem_suggest_topic_key(
        self,
        type: Annotated[
            str, Field(**said(f"kind of memory: {TYPE_HELP}", "the memory's type"))
        ] = "",
        title: Annotated[str, Field(description="the memory's title")] = "",
        content: Annotated[str, Field(description="the memory's content")] = "",
    ) -> ToolResult:
        """Propose a stable topic_key (family/subject, e.g. architecture/auth-model) for a
        memory about a subject that will evolve. Needs a title or content."""
        try:
            key = suggest_topic_key(type, title, content)
        except ValueError:
            raise ValidationError(
                "give a title or content (or both) to suggest a topic key", field="title"
            ) from None
        return envelope(
            self.workspace.default(), f"Suggested topic_key: {key}", data={"topic_key": key}
        )

    # --- changing ---------------------------------------------------------------------------

    def mem_update(
        self,
        id: MemoryId,
        title: Annotated[str | None, Field(description="new title")] = None,
        content: Annotated[str | None, Field(description="new content (replaces it)")] = None,
        type: Annotated[str | None, Field(description="new kind")] = None,
        scope: ScopeArg | None = None,
        topic_key: Annotated[str | None, Field(description="new topic key ('' removes it)")] = None,
        project: IgnoredProjectArg = None,
        allow_secrets: Annotated[
            bool,
            Field(**said("keep text that looks like a secret (see mem_save)", "keep secrets")),
        ] = False,
        importance: Annotated[
            float | Literal["auto"] | None,
            Field(
                **said(
                    "how much it matters, 0-1, set by hand; 'auto' goes back to the computed score",
                    "0-1, or 'auto'",
                )
            ),
        ] = None,
        pinned: Annotated[
            bool | None,
            Field(
                **said("pin (always in mem_context, never archived) or unpin it", "pin or unpin")
            ),
        ] = None,
    ) -> ToolResult:
        """Correct or extend a memory in place (give only the fields that change). Prefer this to
        saving a second memory that contradicts the first."""
        check_size(title, "title", MAX_TITLE_BYTES)
        check_size(content, "content", self.max_content)
        resolved, extra = self.workspace.resolve_write(project)
        warnings: list[str] = []
        obs = self.store.update_observation(
            id,
            title=title,
            content=content,
            type=type,
            scope=scope,
            topic_key=topic_key,
            allow_secrets=allow_secrets,
            warnings=warnings,
            importance=importance,
            pinned=pinned,
        )
        text = (
            f"Memory updated: #{obs.id} {formatting.quoted(obs.title)} "
            f"({obs.type}, scope={obs.scope})"
        )
        return envelope(
            resolved,
            "\n".join([text, *warnings]),
            data={**obs.to_dict(), "warnings": warnings},
            **extra,
        )

    def mem_delete(
        self,
        id: MemoryId,
        hard_delete: Annotated[
            bool,
            Field(description="remove it for good instead of hiding it (not undoable)"),
            flag_or_default(False),
        ] = False,
    ) -> ToolResult:
        """Delete a memory that is wrong or obsolete. By default it is hidden everywhere (and
        the deletion syncs); hard_delete removes its content for good."""
        resolved = self.workspace.resolve(None, write=True)
        obs = self.store.delete_observation(id, hard=hard_delete)
        how = "permanently deleted" if hard_delete else "soft-deleted"
        data = {"id": obs.id, "status": "deleted", "hard_delete": hard_delete}  # as the CLI
        return envelope(resolved, f"Memory #{obs.id} {how}", data=data)

    # --- relations and the graph -------------------------------------------------------------

    def mem_relate(
        self,
        source_id: Annotated[
            int | str,
            Field(**said("the memory that relates: its #id or sync id", "#id or sync id")),
        ],
        target_id: Annotated[
            int | str, Field(**said("the memory it relates to", "#id or sync id"))
        ],
        relation: Annotated[
            Literal[
                "supersedes", "conflicts_with", "related", "compatible", "scoped", "not_conflict"
            ],
            Field(
                **said(
                    "supersedes: source replaces target; conflicts_with: they disagree",
                    "how they relate",
                )
            ),
        ],
        reason: Annotated[str | None, Field(description="why, in one sentence")] = None,
    ) -> ToolResult:
        """Link two memories of one project: 'supersedes' when a newer memory replaces an older
        one (the older then ranks right below it in search), 'conflicts_with' when they disagree
        and someone must decide, or related/compatible/scoped/not_conflict. A pair has one
        relation: relating it again (e.g. a detected conflict as supersedes) replaces it."""
        check_size(reason, "reason", 4000)
        rel = self.store.relate(
            _ref(source_id), _ref(target_id), relation, reason=reason, kind="agent"
        )
        resolved = Resolved(rel.project, "memory", "")
        return envelope(resolved, {"text": formatting.relation(rel), "relation": rel.to_dict()})

    def mem_relations(
        self, id: Annotated[int | str, Field(description="#id or sync id")]
    ) -> ToolResult:
        """A memory's relations to other memories (what it supersedes, what contests it …) and
        whether it needs review (a pending conflict). Judge pending ones with mem_judge."""
        found = self.store.relations_for(_ref(id))
        text = "\n".join(
            [f"#{found.id} {found.title}"]
            + (formatting.relation_lines(found) or ["No relations to other memories."])
        )
        resolved = Resolved(found.project, "memory", "")
        return envelope(resolved, {"text": text, **found.to_dict()})

    def mem_judge(
        self,
        judgment_id: Annotated[str, Field(description="the relation's id (rel-…)")],
        relation: Annotated[
            Literal[
                "supersedes", "conflicts_with", "related", "compatible", "scoped", "not_conflict"
            ]
            | None,
            Field(
                **said(
                    "the verdict: e.g. supersedes (source replaces target), not_conflict",
                    "the verdict",
                )
            ),
        ] = None,
        status: Annotated[
            Literal["judged", "ignored", "pending"],
            Field(
                **said(
                    "judged (confirm), ignored (dismiss) or pending (reopen)", "ignored dismisses"
                )
            ),
        ] = "judged",
        reason: Annotated[str | None, Field(description="why")] = None,
        evidence: Annotated[str | None, Field(description="what shows it (a PR, a test …)")] = None,
        confidence: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
    ) -> ToolResult:
        """Settle a relation, typically a conflict Engram detected between two memories: give
        the verdict (supersedes, not_conflict, compatible …) or dismiss it (status ignored).
        Both memories stop needing review once it is judged."""
        check_size(reason, "reason", 4000)
        check_size(evidence, "evidence", 4000)
        rel = self.store.judge_relation(
            judgment_id, status, relation=relation, reason=reason, evidence=evidence,
            confidence=confidence, kind="agent",
        )  # fmt: skip
        resolved = Resolved(rel.project, "memory", "")
        return envelope(resolved, {"text": formatting.relation(rel), "relation": rel.to_dict()})

    def mem_graph_query(
        self,
        question: Annotated[
            str,
            Field(
                **said(
                    "e.g. 'what connects the auth middleware to the session store?'",
                    "e.g. 'what uses the session store?'",
                )
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=100, **said("triples (default 10)", "triples"))] = 10,
        project: ProjectArg = None,
        all_projects: Annotated[
            bool, Field(**said("every project, not only this one", "every project"))
        ] = False,
    ) -> ToolResult:
        """Ask the graph of what memories name (files, modules, libraries, services, errors,
        people, decisions): returns subject–predicate–object triples connecting the entities
        the question names, each with the memories that state it. Good for 'how does X reach
        Y', 'what uses Z', 'what depends on W'."""
        if all_projects:
            resolved = Resolved("", "all_projects", "")
        else:
            resolved = self.workspace.resolve(project, write=False)
        answer = self.store.graph_query(question, project=resolved.project or None, limit=limit)
        return envelope(resolved, {"text": formatting.graph_answer(answer), **answer.to_dict()})

    def mem_graph_ingest(
        self,
        id: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_INTEGER,
                description="one memory's #id; omit for every memory "
                "of the project not in the graph yet",
            ),
        ] = None,
    ) -> ToolResult:
        """Extract entities and relationships from memories into the graph (deterministic
        rules, no model). Queries also catch up by themselves; use this after many saves."""
        resolved = self.workspace.resolve(None, write=False)
        report = self.store.graph_ingest(id, project=None if id else resolved.project or None)
        return envelope(resolved, report.to_dict())

    # --- projects and statistics ------------------------------------------------------------

    def mem_stats(self, project: ProjectArg = None) -> ToolResult:
        """How many sessions, memories and prompts are stored, and in which projects (the whole
        store unless project is given)."""
        resolved = self.workspace.resolve(project, write=False)
        given = project is not None and project.strip()
        scope = resolved.project if given else None
        stats = self.store.stats(scope)
        vectors = self.store.vector_coverage(scope)
        return envelope(
            resolved,
            formatting.stats(stats, vectors=vectors),
            data={**stats.to_dict(), "vectors": vectors.to_dict()},  # as engram stats --json
        )

    def mem_current_project(self) -> ToolResult:
        """Which project this server saves to and why (directory, git remote, override), plus
        the projects that exist. Never fails; use it when unsure where memories go."""
        detected = self.workspace.detection(refresh=True)
        resolved = self.workspace.default()
        if resolved.source == "ambiguous":
            choices = detected.available_projects
            text = (
                f"{detected.cwd} holds several repositories: pass project set to one of "
                f"{', '.join(choices)} to save."
            )
            available = choices
        else:
            text = (
                f"Memories go to project {formatting.quoted(resolved.project)} "
                f"(from {resolved.source}{': ' + resolved.path if resolved.path else ''})."
            )
            available = self.workspace.known_projects()
        return envelope(
            resolved,
            text,
            data={**detected.to_dict(), "project": resolved.project,
                  "project_source": resolved.source, "available_projects": available},
            cwd=detected.cwd,
            available_projects=available,
            warning=detected.warning,
        )  # fmt: skip

    def mem_list_projects(self) -> ToolResult:
        """Every project with its memory, session and prompt counts and directories."""
        projects = [p.to_dict() for p in self.store.list_projects()]
        return envelope(self.workspace.default(), {"projects": projects, "count": len(projects)})

    # --- memories from git history ----------------------------------------------------------

    def mem_ingest_git(
        self,
        days: Annotated[int, Field(ge=1, le=36500, description="how far back (default 30)")] = 30,
        repo: Annotated[
            str | None,
            Field(description="the repository's path (default: this server's directory)"),
        ] = None,
        include_bots: Annotated[
            bool, Field(description="also change sets made only by bots (dependabot…)")
        ] = False,
    ) -> ToolResult:
        """Save one memory per recent change set of the project's git repository (a merge and
        the commits it brought in are one). Safe to repeat: change sets already saved, here or
        by a teammate, are never added twice."""
        from engram.ingest.git import ingest_git

        resolved = self.workspace.resolve(None, write=True)
        report = ingest_git(
            self.store,
            repo or self.workspace.cwd,
            resolved.project,
            days=days,
            include_bots=include_bots,
        )
        return envelope(resolved, report.to_dict())

    def mem_summarize(
        self,
        days: Annotated[int, Field(ge=1, le=36500, description="how far back (default 7)")] = 7,
        min_confidence: Annotated[
            float,
            Field(
                ge=0.0,
                le=1.0,
                description="keep learnings at or above this confidence (default 0.6)",
                validation_alias=AliasChoices("min_confidence", "minConfidence"),
            ),
        ] = 0.6,
        dry_run: Annotated[bool, Field(description="show the learnings, save nothing")] = False,
    ) -> ToolResult:
        """Extract learnings from the project's recent memories and commits and save them as
        'learning' memories with their confidence and sources. Uses Claude when the server has
        ANTHROPIC_API_KEY, else an offline extraction of Learned blocks and Key Learnings.
        Private text and secrets never leave the machine."""
        from engram.ingest.provider import provider_from_env
        from engram.ingest.summarize import summarize

        resolved = self.workspace.resolve(None, write=True)
        report = summarize(
            self.store,
            resolved.project,
            days=days,
            min_confidence=min_confidence,
            provider=provider_from_env(),
            repo=self.workspace.cwd,
            dry_run=dry_run,
        )
        return envelope(resolved, report.to_dict())

    def ingestGit(  # the second seed's tool name
        self,
        workspace: Annotated[
            str | None, Field(description="the repository's path (default: the server's)")
        ] = None,
        days: Annotated[int, Field(ge=1, le=36500, description="how far back")] = 30,
    ) -> ToolResult:
        """Alias of mem_ingest_git with the second seed's argument names."""
        return self.mem_ingest_git(days=days, repo=workspace)

    def summarize(
        self,
        workspace: Annotated[
            str | None, Field(description="ignored: the server's project is summarized")
        ] = None,
        days: Annotated[int, Field(ge=1, le=36500, description="how far back")] = 7,
        minConfidence: Annotated[  # the second seed's argument name
            float, Field(ge=0.0, le=1.0, description="keep learnings at or above")
        ] = 0.6,
    ) -> ToolResult:
        """Alias of mem_summarize with the second seed's argument names."""
        return self.mem_summarize(days=days, min_confidence=minConfidence)

    def graph_query(  # the first seed's tool name
        self,
        question: Annotated[str, Field(description="e.g. 'What connects edge to Tailscale?'")],
        limit: Annotated[int, Field(ge=1, le=100, **said("triples (default 10)", "triples"))] = 10,
    ) -> ToolResult:
        """Alias of mem_graph_query with the first seed's argument names."""
        return self.mem_graph_query(question=question, limit=limit)

    def graph_relationships(  # the first seed's tool name
        self,
        entity_name: Annotated[str, Field(description="an entity (case-insensitive)")],
    ) -> ToolResult:
        """Every relationship of a named entity in the graph of this project's memories (the
        first seed's graph_relationships); an empty list when the graph has no such entity."""
        resolved = self.workspace.resolve(None, write=False)
        found = self.store.graph_relationships(entity_name, project=resolved.project or None)
        return envelope(resolved, found.to_dict())

    def graph_ingest(  # the first seed's tool name
        self,
        path: Annotated[
            str | None,
            Field(description="a memory's #id; omit for every memory not in the graph yet"),
        ] = None,
    ) -> ToolResult:
        """Alias of mem_graph_ingest (the first seed took a vault file path; here a memory is
        named by its #id)."""
        ref = _ref(path) if path else None
        if ref is not None and not isinstance(ref, int):
            raise ValidationError("path must be a memory's #id (e.g. 12 or #12)", field="path")
        return self.mem_graph_ingest(id=ref)

    def mem_merge_projects(self, sources: list[str], to: str) -> ToolResult:
        """Body of ``mem_merge_projects`` (its ``from`` argument is a Python keyword, so
        ``engram.mcp.server`` registers it with an explicit argument model)."""
        names = [normalize_project(s)[0] for s in sources if s and s.strip()]
        unknown = [n for n in names if not self.store.project_exists(n)]
        if unknown:  # (the store refuses it too: the same check, this face's hint)
            raise self.workspace.unknown_project(unknown[0])
        result = self.store.merge_projects(names, to)
        resolved = Resolved(result.canonical, "explicit_override", "")
        return envelope(resolved, result.to_dict(), data=result.to_dict())


MERGE_DESCRIPTION = (
    "Move every memory, session and prompt of one or more projects into another (for name "
    "variants such as 'my-app' and 'myapp'). Each moved memory syncs as a move."
)


def _ref(value: int | str) -> int | str:
    """A memory as agents name it: ``12``, ``"#12"`` or a sync id."""
    if isinstance(value, str) and value.strip().removeprefix("#").isdigit():
        return int(value.strip().removeprefix("#"))
    return value

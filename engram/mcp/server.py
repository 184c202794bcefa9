"""``engram mcp``: the MCP stdio server named ``engram`` (official ``mcp`` SDK 2.x, MCPServer).

This module assembles the server: which tools a ``--tools`` profile exposes, their titles and
hints, and how failures become MCP tool errors (``is_error``) whose text is JSON an agent can act
on — ``{"error", "error_code"[, "available_projects"]}`` — so a bad call never stops the
server. The tools themselves live in :mod:`engram.mcp.tools`.

What ``tools/list`` costs an agent is context it pays on every session, so by default the
server lists the agent profile (no admin tools) *compactly* (:mod:`engram.mcp.listing`);
``--tools all`` lists every tool with its full description and output schema.

Start-up matters (agents start this process often): import only the SDK and the store here.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Annotated, Any

import anyio
import orjson
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field

from engram import __version__, settings
from engram.errors import (
    ConflictError,
    EngramError,
    NotFoundError,
    ProjectResolutionError,
    StoreUnavailableError,
    ValidationError,
)
from engram.mcp import schemas
from engram.mcp.curation_tools import CurationTools
from engram.mcp.instructions import INSTRUCTIONS
from engram.mcp.listing import compact_tools, full_tools
from engram.mcp.tools import (
    MERGE_DESCRIPTION,
    Envelope,
    MemoryTools,
    Workspace,
)
from engram.mcp.transport import AnsweringReadStream
from engram.store import Store
from engram.store.db import MAX_INTEGER

AGENT_TOOLS = (
    "mem_save",
    "mem_search",
    "mem_context",
    "mem_session_summary",
    "mem_session_start",
    "mem_session_end",
    "mem_get_observation",
    "mem_suggest_topic_key",
    "mem_capture_passive",
    "mem_save_prompt",
    "mem_update",
    "mem_current_project",
    "mem_list_projects",
    "mem_relate",
    "mem_relations",
    "mem_judge",
    "mem_graph_query",
    "mem_review",
    "mem_pin",
    "mem_unpin",
)
ADMIN_TOOLS = (
    "mem_delete",
    "mem_restore",
    "mem_stats",
    "mem_timeline",
    "mem_merge_projects",
    "mem_ingest_git",
    "mem_summarize",
    "mem_graph_ingest",
    "mem_consolidate",
)
ALL_TOOLS = AGENT_TOOLS + ADMIN_TOOLS
#: The seeds' names (the second seed's ingest tools, the first seed's graph tools), served only
#: when asked for (``--tools seed`` or by name), so the default tool list has one name per tool.
SEED_ALIASES = ("ingestGit", "summarize", "graph_query", "graph_relationships", "graph_ingest")
PROFILES: dict[str, tuple[str, ...]] = {
    "agent": AGENT_TOOLS,
    "admin": ADMIN_TOOLS,
    "all": ALL_TOOLS,
    "seed": SEED_ALIASES,
}


def _hints(title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False):
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,  # only the local store is touched
    )


ANNOTATIONS: dict[str, ToolAnnotations] = {
    "mem_save": _hints("Save a memory", read_only=False),
    "mem_search": _hints("Search memories", read_only=True, idempotent=True),
    "mem_context": _hints("Recent context", read_only=True, idempotent=True),
    "mem_session_summary": _hints("Save the session summary", read_only=False),
    "mem_session_start": _hints("Start a session", read_only=False, idempotent=True),
    "mem_session_end": _hints("End a session", read_only=False, idempotent=True),
    "mem_get_observation": _hints("Get a memory", read_only=True, idempotent=True),
    "mem_suggest_topic_key": _hints("Suggest a topic key", read_only=True, idempotent=True),
    "mem_capture_passive": _hints("Capture key learnings", read_only=False, idempotent=True),
    "mem_save_prompt": _hints("Save the user's prompt", read_only=False),
    "mem_update": _hints("Update a memory", read_only=False, destructive=True),
    "mem_current_project": _hints("Current project", read_only=True, idempotent=True),
    "mem_list_projects": _hints("List projects", read_only=True, idempotent=True),
    "mem_delete": _hints("Delete a memory", read_only=False, destructive=True),
    "mem_stats": _hints("Memory statistics", read_only=True, idempotent=True),
    "mem_timeline": _hints("Timeline around a memory", read_only=True, idempotent=True),
    "mem_merge_projects": _hints("Merge projects", read_only=False, destructive=True),
    "mem_ingest_git": _hints("Memories from git history", read_only=False, idempotent=True),
    "mem_relate": _hints("Relate two memories", read_only=False, idempotent=True),
    "mem_relations": _hints("A memory's relations", read_only=True, idempotent=True),
    "mem_judge": _hints("Judge a relation", read_only=False, idempotent=True),
    "mem_graph_query": _hints("Ask the memory graph", read_only=True, idempotent=True),
    "mem_graph_ingest": _hints("Build the memory graph", read_only=False, idempotent=True),
    "mem_review": _hints("Memories to review", read_only=False, idempotent=True),
    "mem_pin": _hints("Pin a memory", read_only=False, idempotent=True),
    "mem_unpin": _hints("Unpin a memory", read_only=False, idempotent=True),
    "mem_restore": _hints("Restore a memory", read_only=False, idempotent=True),
    "mem_consolidate": _hints("Consolidate memories", read_only=False, destructive=True),
    # The only tool that may reach beyond this machine: a model provider, when a key is set.
    "mem_summarize": ToolAnnotations(
        title="Summarize learnings",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=True,
    ),
}
ANNOTATIONS["ingestGit"] = ANNOTATIONS["mem_ingest_git"]
ANNOTATIONS["summarize"] = ANNOTATIONS["mem_summarize"]
ANNOTATIONS["graph_query"] = ANNOTATIONS["mem_graph_query"]
ANNOTATIONS["graph_relationships"] = _hints(
    "An entity's relationships", read_only=True, idempotent=True
)
ANNOTATIONS["graph_ingest"] = ANNOTATIONS["mem_graph_ingest"]


def full_listing(spec: str | Iterable[str] | None) -> bool:
    """Whether ``--tools`` asks for the full listing (the ``all`` profile)."""
    tokens = spec.split(",") if isinstance(spec, str) else list(spec or [])
    return "all" in {t.strip() for t in tokens if t}


def select_tools(spec: str | Iterable[str] | None) -> list[str]:
    """Tool names for a ``--tools`` value: profiles (agent, admin, all) and/or tool names,
    comma-separated. Empty means the agent profile. Unknown names are an error (nothing
    starts)."""
    tokens = spec.split(",") if isinstance(spec, str) else list(spec or [])
    tokens = [t.strip() for t in tokens if t and t.strip()]
    if not tokens:
        return list(AGENT_TOOLS)
    chosen: set[str] = set()
    for token in tokens:
        if token in PROFILES:
            chosen.update(PROFILES[token])
        elif token in ALL_TOOLS or token in SEED_ALIASES:
            chosen.add(token)
        else:
            raise ValidationError(
                f"unknown tool or profile {token!r} in --tools; use agent, admin, all or any of: "
                f"{', '.join(ALL_TOOLS + SEED_ALIASES)}",
                field="tools",
            )
    return [name for name in ALL_TOOLS + SEED_ALIASES if name in chosen]


# --- tool errors ----------------------------------------------------------------------------

_CODES: tuple[tuple[type[EngramError], str], ...] = (
    (NotFoundError, "not_found"),
    (ValidationError, "invalid_argument"),
    (ConflictError, "conflict"),
    (StoreUnavailableError, "store_unavailable"),
)
_NOT_FOUND_HINT = ". Find the right #id with mem_search."


def error_result(message: str, code: str, **extra: Any) -> CallToolResult:
    """A tool error (``is_error``) whose text is JSON. No ``structured_content``: some clients
    check it against the tool's output schema (the success envelope) even on errors."""
    data = {"error": message, "error_code": code, **extra}
    return CallToolResult(
        content=[TextContent(type="text", text=orjson.dumps(data).decode())], is_error=True
    )


def engram_error_result(exc: EngramError) -> CallToolResult:
    message = str(exc)
    if isinstance(exc, ProjectResolutionError):
        return error_result(message, exc.code, available_projects=exc.available_projects)
    code = getattr(exc, "code", None)
    if code is None:
        code = next((c for cls, c in _CODES if isinstance(exc, cls)), "error")
    if code == "not_found" and message.startswith("Observation #"):
        message += _NOT_FOUND_HINT
    return error_result(message, code)


def _describe_problem(arg: str, error: Any) -> str:
    kind, received = error["type"], error.get("input")
    # JSON's words for what arrived (a client sends null, not None); strings as the CLI and
    # the store quote them ('abc'), so every face names a bad value the same way.
    names = {None: "null", True: "true", False: "false"}
    literal = isinstance(received, bool) or received is None
    shown = names[received] if literal else repr(received)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if kind == "missing":
        return f"{arg} is required"
    if kind.startswith("int_"):
        return f"{arg} must be an integer (got {shown})"
    if kind.startswith("string_"):
        return f"{arg} must be a string (got {shown})"
    if kind.startswith("bool_"):
        return f"{arg} must be true or false (got {shown})"
    if kind == "literal_error":
        return f"{arg} must be {error['ctx']['expected']} (got {shown})"
    return f"{arg}: {error['msg']} (got {shown})"


def invalid_arguments_result(tool: str, exc: pydantic.ValidationError) -> CallToolResult:
    """Name each wrong argument once, in words an agent can act on."""
    problems: dict[str, str] = {}
    for error in exc.errors():
        arg = str(error["loc"][0]) if error["loc"] else "arguments"
        problems.setdefault(arg, _describe_problem(arg, error))
    return error_result(
        f"Invalid arguments for {tool}: {'; '.join(problems.values())}. Nothing was done; "
        "check the tool's input schema and call again.",
        "invalid_arguments",
        arguments=sorted(problems),
    )


class EngramMCPServer(MCPServer):
    """MCPServer whose tool failures are JSON tool errors, never protocol errors or crashes."""

    def __init__(
        self, *args: Any, tool_names: Sequence[str], full: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tool_names = tuple(tool_names)
        self.full = full

    async def list_tools(self) -> list[Any]:
        """The listing: compact unless the server runs with ``--tools all`` (module doc)."""
        tools = await super().list_tools()
        return full_tools(tools) if self.full else compact_tools(tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in self.tool_names:
            known = name in ALL_TOOLS or name in SEED_ALIASES
            hidden = " (not enabled by this server's --tools)" if known else ""
            return error_result(
                f"Unknown tool {name!r}{hidden}. Available: {', '.join(self.tool_names)}.",
                "unknown_tool",
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic.ValidationError):
                return invalid_arguments_result(name, cause)
            if isinstance(cause, EngramError):
                return engram_error_result(cause)
            if isinstance(cause, sqlite3.DatabaseError):
                return error_result(f"database error: {cause}", "store_unavailable")
            if isinstance(cause, OverflowError):  # a number SQLite cannot hold got through
                return error_result(
                    f"Invalid arguments for {name}: a number is out of range (at most "
                    f"{MAX_INTEGER}). Nothing was done.",
                    "invalid_arguments",
                )
            raise  # a bug: the SDK logs it and answers with a generic tool error

    async def run_stdio_async(self) -> None:
        """Serve stdio like the SDK does, with every request it cannot parse answered at once
        (:mod:`engram.mcp.transport`) instead of left waiting for the client's timeout."""
        async with stdio_server() as (read_stream, write_stream):
            server = self._lowlevel_server
            await server.run(
                AnsweringReadStream(read_stream, write_stream),
                write_stream,
                server.create_initialization_options(),
            )


# --- assembling the server ------------------------------------------------------------------


class MergeArguments(ArgModelBase):
    """``mem_merge_projects`` takes ``from``, a Python keyword, so its model is explicit."""

    sources: Annotated[
        str | list[str],
        Field(alias="from", description="project(s) to merge away: a list or 'a,b' text"),
    ]
    to: Annotated[str, Field(min_length=1, description="the project that keeps everything")]


def _merge_tool(tools: MemoryTools) -> Tool:
    def merge(**arguments: Any) -> CallToolResult:
        sources = arguments["from"]
        names = sources.split(",") if isinstance(sources, str) else sources
        return tools.mem_merge_projects(names, arguments["to"])

    return Tool(
        fn=merge,
        name="mem_merge_projects",
        title=ANNOTATIONS["mem_merge_projects"].title,
        description=MERGE_DESCRIPTION,
        parameters=MergeArguments.model_json_schema(by_alias=True),
        fn_metadata=FuncMetadata(arg_model=MergeArguments, output_model=Envelope),
        is_async=False,
        context_kwarg=None,  # its default, which mypy cannot see through pydantic's Field
        annotations=ANNOTATIONS["mem_merge_projects"],
    )


def _tool(impl: CurationTools, name: str) -> Tool:
    """The tool ``name`` of ``impl``, built: its argument model from the method's signature."""
    if name == "mem_merge_projects":
        return _merge_tool(impl)
    annotations, fn = ANNOTATIONS[name], getattr(impl, name)
    return Tool.from_function(
        fn,
        name=name,
        title=annotations.title,
        description=_description(fn),
        annotations=annotations,
    )


def _description(fn: Any) -> str:
    """Docstrings are the descriptions agents read: without the code's indentation."""
    return " ".join((fn.__doc__ or "").split())


def every_tool(store: Store) -> list[Tool]:
    """Every tool (aliases included) built over ``store``: what ``schemas.json`` is made of."""
    impl = CurationTools(store, Workspace(store, os.getcwd(), None))
    return [_tool(impl, name) for name in ALL_TOOLS + SEED_ALIASES]


def build_server(
    store: Store,
    *,
    tools: Sequence[str] | None = None,
    cwd: str | None = None,
    project: str | None = None,
    full: bool | None = None,
) -> EngramMCPServer:
    """The ``engram`` server exposing ``tools`` (default: every tool) over ``store``.

    ``cwd`` is the directory the project is detected from (default: the process's);
    ``project`` overrides detection (``--project`` / ``ENGRAM_PROJECT``); ``full`` lists the
    tools with full descriptions and output schemas (default: when every tool is exposed).
    Each tool is listed from its generated schemas and built on its first call
    (:mod:`engram.mcp.schemas`), or built here when those are out of date.
    """
    names = list(tools) if tools is not None else list(ALL_TOOLS)
    if full is None:
        full = set(names) >= set(ALL_TOOLS)
    workspace = Workspace(store, cwd or os.getcwd(), project)
    impl = CurationTools(store, workspace)
    generated = schemas.load()
    registered: list[Tool] = []
    for name in names:
        if name not in generated:
            registered.append(_tool(impl, name))
            continue
        annotations = ANNOTATIONS[name]
        registered.append(
            schemas.deferred(
                generated[name],
                functools.partial(_tool, impl, name),
                fn=getattr(impl, name),
                name=name,
                title=annotations.title,
                annotations=annotations,
            )
        )
    return EngramMCPServer(
        "engram",
        title="Engram memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=registered,
        tool_names=names,
        full=full,
        log_level="WARNING",
    )


def background_services(store: Store) -> list[AbstractAsyncContextManager[Any]]:
    """Long-lived helpers that share this process's store for as long as the client stays
    connected: conflict checks of saved memories, the background vectorizer when the semantic
    extra is installed, the background purge of hard-deleted text (unless
    ``ENGRAM_AUTO_PURGE=0``) and the cloud autosync loop when ``ENGRAM_CLOUD_AUTOSYNC=1``. Each
    is entered before the first request and exited after the last; tool writes reach them
    through ``store.add_write_listener``."""
    services: list[AbstractAsyncContextManager[Any]] = [conflict_checks(store)]
    from engram.semantic import background  # no numpy or model import until it runs

    if background.wanted(store):
        vectorizer = background.BackgroundVectorizer(store)
        services.append(background.vectorizer_running(vectorizer))
    if store.config.auto_purge:
        from engram.store.purge_worker import PurgeWorker, purge_running

        services.append(purge_running(PurgeWorker(store)))
    if settings.raw("ENGRAM_CLOUD_AUTOSYNC") != "1":
        return services  # the sync stack (httpx) is imported only when asked for
    from engram.sync.cloud.autosync import autosync_from_env, autosync_running

    manager = autosync_from_env(store)
    if manager is not None:
        services.append(autosync_running(manager))
    return services


@asynccontextmanager
async def conflict_checks(store: Store) -> AsyncIterator[None]:
    """Conflict checks of saved memories, run by a background thread shortly after writes
    (never on the save path; engram/store/conflicts.py)."""
    from engram.store.conflicts import ConflictWorker

    with ConflictWorker(store):
        yield


async def serve(server: MCPServer, store: Store) -> None:
    """Serve stdio, with the background services running, until the client disconnects."""
    async with AsyncExitStack() as stack:
        for service in background_services(store):
            await stack.enter_async_context(service)
        await server.run_stdio_async()


def run(tools: str | None = None, project: str | None = None) -> None:
    """``engram mcp``: open the store, then serve stdio until the client disconnects."""
    names = select_tools(tools)
    store = Store.open()
    try:
        override = project or store.config.project_override
        server = build_server(store, tools=names, project=override, full=full_listing(tools))
        anyio.run(serve, server, store)
    finally:
        store.close()

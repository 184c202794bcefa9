"""Memory commands: save, search, get, context, timeline, stats, vectorize, delete, version."""

from __future__ import annotations

import argparse

from engram.cli.common import (
    add_json_flag,
    emit,
    open_store,
    read_text_argument,
    resolve_project,
    wants_json,
)

DELETED_HELP = "include soft-deleted memories (marked as such; engram restore brings one back)"
TYPES_HELP = "bugfix, decision, architecture, discovery, pattern, config, learning, manual…"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "save",
        help="save a memory",
        description="Save a memory. CONTENT '-' reads it from standard input.",
    )
    p.add_argument("title")
    p.add_argument("content", help="structured text: **What** / **Why** / **Where** / **Learned**")
    p.add_argument("--type", default="manual", help=f"kind of memory ({TYPES_HELP})")
    p.add_argument("--project", help="project (default: detected from the directory)")
    p.add_argument("--scope", choices=["project", "personal"], default="project")
    p.add_argument(
        "--topic", dest="topic_key", help="topic key: saving it again updates that memory"
    )
    p.add_argument(
        "--session", dest="session_id", help="session id (default manual-save-<project>)"
    )
    p.add_argument("--tool", dest="tool_name", help="tool that produced the memory")
    p.add_argument(
        "--allow-secrets",
        action="store_true",
        help="keep text that looks like a secret (by default it is saved as [REDACTED:kind])",
    )
    p.add_argument(
        "--importance",
        help="how much it matters, 0-1 (default: computed from length, topics, links, "
        "recency and reads)",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_save)

    p = sub.add_parser("search", help="search memories with words or a question")
    p.add_argument("query")
    p.add_argument("--type", help="only memories of this type")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: every project)")
    where.add_argument("--all", action="store_true", help="every project (the default)")
    p.add_argument("--scope", choices=["project", "personal"])
    p.add_argument("--limit", type=int, default=None, help="results (default 10, max 20)")
    p.add_argument(
        "--match",
        dest="match_mode",
        choices=["any", "all"],
        default="any",
        help="any word (ranked, default) or all words",
    )
    p.add_argument("--since", help="created on or after (YYYY-MM-DD or RFC 3339)")
    p.add_argument("--until", help="created on or before")
    p.add_argument(
        "--mode",
        choices=["lexical", "semantic", "hybrid"],
        default=None,
        help="words, meaning, or both (default: hybrid with the semantic extra, else lexical; "
        "ENGRAM_SEARCH_MODE changes it)",
    )
    p.add_argument("--deleted", action="store_true", help=DELETED_HELP)
    p.add_argument(
        "--as-of",
        help="what was true then: a date (YYYY-MM-DD, the end of that day) or an ISO 8601 "
        "date and time",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("list", help="the newest memories, a page at a time")
    p.add_argument("--project", help="only this project (default: every project)")
    p.add_argument("--type", help="only memories of this type")
    p.add_argument("--scope", choices=["project", "personal"])
    p.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    p.add_argument("--offset", type=int, default=0, help="skip this many first")
    p.add_argument("--deleted", action="store_true", help=DELETED_HELP)
    add_json_flag(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("get", help="show one memory in full")
    p.add_argument("id", help="the memory's #id")
    p.add_argument("--deleted", action="store_true", help="show it even if it was deleted")
    add_json_flag(p)
    p.set_defaults(func=cmd_get)

    p = sub.add_parser(
        "history",
        help="a memory's earlier versions",
        description="Show a memory as it is now and the earlier versions this machine kept "
        "(the last 20: its own edits, topic saves and edits that arrived by git or cloud sync).",
    )
    p.add_argument("id", help="the memory's #id")
    add_json_flag(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("context", help="recent sessions, prompts and memories of a project")
    p.add_argument("project_arg", nargs="?", metavar="project")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project")
    where.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--scope", choices=["project", "personal"])
    p.add_argument("--max-bytes", type=int, help="cap the size of the text")
    add_json_flag(p)
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("timeline", help="memories saved around one, in its session")
    p.add_argument("id")
    p.add_argument("--before", type=int, default=5)
    p.add_argument("--after", type=int, default=5)
    add_json_flag(p)
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser("stats", help="how much is stored")
    p.add_argument("--project", help="only this project")
    add_json_flag(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser(
        "vectorize",
        help="embed memories for semantic search (needs the semantic extra)",
        description="Embed every memory that has no up-to-date vector yet (semantic and hybrid "
        "search use them). Saves never wait for this: searches and the long-running servers "
        "catch up on their own; this does it in bulk.",
    )
    p.add_argument("--rebuild", action="store_true", help="re-embed every memory")
    p.add_argument("--project", help="only this project's memories")
    add_json_flag(p)
    p.set_defaults(func=cmd_vectorize)

    p = sub.add_parser(
        "delete",
        help="delete memories, a session or a prompt",
        description="engram delete <id> [<id> …] [--hard] | delete session <id> | "
        "delete prompt <id>. Several memory ids are deleted together: if one of them is not "
        "a memory, none is deleted. A soft delete (the default) is undone by engram restore.",
    )
    p.add_argument(
        "target",
        nargs="+",
        metavar="[kind] id",
        help="memory ids, or 'session <id>' or 'prompt <id>'",
    )
    p.add_argument(
        "--hard",
        action="store_true",
        help="remove the memory for good (not undoable): from every replica that syncs, and "
        "from this database's files by a background `engram purge`; git history keeps what was "
        "already pushed (no tool of ours can rewrite it)",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("version", help="print the version")
    add_json_flag(p)
    p.set_defaults(func=cmd_version)


def cmd_save(args: argparse.Namespace) -> int:
    from engram import formatting

    project = resolve_project(args.project).project
    with open_store() as store:
        result = store.add_observation(
            title=args.title,
            content=read_text_argument(args.content),
            type=args.type,
            session_id=args.session_id,
            project=project,
            scope=args.scope,
            topic_key=args.topic_key,
            tool_name=args.tool_name,
            allow_secrets=args.allow_secrets,
            importance=_importance(args.importance),
        )
    emit(args, formatting.save_result(result), result.to_dict())
    return 0


def _importance(value: str | None) -> float | None:
    """``--importance``: a number from 0 to 1 (checked by the store's rule)."""
    if value is None:
        return None
    from engram.importance import check_importance

    return check_importance(value)


def cmd_search(args: argparse.Namespace) -> int:
    from engram import formatting, semantic

    semantic.one_shot = True  # one question, then exit: a model that starts quickly
    with open_store() as store:
        project = None
        if not args.all and args.project:
            project = store.require_project(args.project)  # a typo gets a did-you-mean
        results = store.search(
            args.query,
            type=args.type,
            project=project,
            scope=args.scope,
            limit=args.limit,
            match_mode=args.match_mode,
            since=args.since,
            until=args.until,
            mode=args.mode,
            include_deleted=args.deleted,
            as_of=args.as_of,
            check_conflicts=True,  # what was saved just before shows its conflicts
        )
    emit(args, formatting.search_results(args.query, results), [o.to_dict() for o in results])
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from engram import formatting
    from engram.store.checks import check_count

    limit = check_count(args.limit, "limit", default=20, maximum=1000)
    offset = check_count(args.offset, "offset", default=0, minimum=0)
    with open_store() as store:
        project = store.require_project(args.project) if args.project else None
        found = store.recent_observations(
            project, args.scope, limit, type=args.type, offset=offset,
            include_deleted=args.deleted,
        )  # fmt: skip
        total = store.count_observations(
            project, args.scope, type=args.type, include_deleted=args.deleted
        )
    data = {
        "observations": [o.to_dict() for o in found],
        "total": total,
        "offset": offset,
        "limit": limit,
    }
    emit(args, formatting.memory_page(found, total, offset), data)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        obs = store.get_observation(args.id, include_deleted=args.deleted, record_access=True)
        # relations link live memories: a deleted one (shown with --deleted) has none to show
        found = store.relations_for(obs.id) if obs.deleted_at is None else None
    data = {
        **obs.to_dict(),
        "needs_review": bool(found and found.needs_review),
        "relations": [r.to_dict() for r in found.relations] if found else [],
    }
    emit(args, formatting.observation(obs, blocks=True, relations=found), data)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        found = store.history(args.id)
    emit(args, formatting.history(found), found.to_dict())
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    project, named = None, None
    if not args.all:
        named = args.project or args.project_arg
        project = named or resolve_project(None).project
    with open_store() as store:
        if named:  # a name given on purpose must exist (this directory's may be new)
            project = store.require_project(named)
        text = store.context(project, args.scope, max_bytes=args.max_bytes)
    emit(args, text or "No previous session memories found.", {"project": project, "context": text})
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        tl = store.timeline(args.id, args.before, args.after)
    emit(args, formatting.timeline(tl), tl.to_dict())
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        project = store.require_project(args.project) if args.project else None
        st = store.stats(project)
        vectors = store.vector_coverage(project)
        path = str(store.path)
    emit(
        args,
        formatting.stats(st, path, vectors),
        {**st.to_dict(), "vectors": vectors.to_dict(), "database": path},
    )
    return 0


def cmd_vectorize(args: argparse.Namespace) -> int:
    from engram import formatting, semantic
    from engram.cli.progress import factory

    semantic.require()  # before opening anything: one line saying how to install the extra
    with open_store() as store:
        result = store.vectorize(
            project=args.project,
            rebuild=args.rebuild,
            progress=factory(quiet=wants_json(args), min_total=1),
        )
        vectors = store.vector_coverage(args.project)
    emit(
        args,
        formatting.vectorize_result(result, vectors),
        {**result.to_dict(), "vectors": vectors.to_dict()},
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from engram.errors import ValidationError

    target = args.target
    kind = target[0] if target[0] in ("session", "prompt", "observation", "memory") else None
    idents = target[1:] if kind else target
    if kind in ("session", "prompt") and len(idents) != 1:
        raise ValidationError(f"usage: engram delete {kind} <id> (one {kind} at a time)")
    if not idents:
        raise ValidationError("usage: engram delete <id> [<id> …] | delete session <id> | "
                              "delete prompt <id>")  # fmt: skip
    with open_store() as store:
        if kind == "session":
            store.delete_session(idents[0])
            message = f'Session "{idents[0]}" deleted'
            data: dict = {"session_id": idents[0], "status": "deleted"}
        elif kind == "prompt":
            prompt = store.delete_prompt(idents[0])
            message = f"Prompt #{prompt.id} deleted"
            data = {"id": prompt.id, "status": "deleted"}
        else:
            gone = store.delete_observations(idents, hard=args.hard)
            how = "permanently deleted" if args.hard else "soft-deleted"
            message = "\n".join(f"Memory #{obs.id} {how}" for obs in gone)  # the Go tool's words
            rows = [{"id": o.id, "status": "deleted", "hard_delete": bool(args.hard)} for o in gone]
            # one id answers as before (one object); several answer with a list of them
            data = rows[0] if len(rows) == 1 else {"deleted": rows, "count": len(rows)}
    emit(args, message, data)
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    from engram import __version__

    emit(args, f"engram {__version__}", {"version": __version__})
    return 0


__all__ = ["register", "wants_json"]

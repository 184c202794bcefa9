"""``engram projects list|merge|prune``."""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag, emit, open_store
from engram.text import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("projects", help="list, merge or prune projects")
    add_json_flag(p)
    actions = p.add_subparsers(dest="action", metavar="<action>", required=True)

    q = actions.add_parser("list", help="projects with their counts")
    add_json_flag(q)
    q.set_defaults(func=cmd_list)

    for name in ("merge", "consolidate"):
        q = actions.add_parser(
            name,
            help="move every memory of some projects into another"
            if name == "merge"
            else "same as merge",
        )
        q.add_argument("sources", nargs="+", metavar="from", help="project(s) to merge away")
        q.add_argument("--to", required=True, help="the project that keeps everything")
        add_json_flag(q)
        q.set_defaults(func=cmd_merge)

    q = actions.add_parser("prune", help="remove projects that have no memories left")
    q.add_argument("--dry-run", action="store_true", help="only show what would be removed")
    add_json_flag(q)
    q.set_defaults(func=cmd_prune)


def cmd_list(args: argparse.Namespace) -> int:
    with open_store() as store:
        projects = store.list_projects()
    if not projects:
        human = "No projects yet."
    else:
        # The name goes last: however long it is, or however wide its characters, the number
        # columns before it stay aligned (and a narrow terminal wraps only the name).
        rows = [("MEMORIES", "SESSIONS", "PROMPTS", "PROJECT")] + [
            (str(p.observation_count), str(p.session_count), str(p.prompt_count), p.name)
            for p in projects
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        human = "\n".join(
            "  ".join(cell.rjust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
            for row in rows
        )
    emit(args, human, {"projects": [p.to_dict() for p in projects], "count": len(projects)})
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    with open_store() as store:
        result = store.merge_projects(args.sources, args.to)
    human = (
        f"Merged {', '.join(result.sources_merged)} into {result.canonical}: "
        f"{plural(result.observations_updated, 'memory')}, "
        f"{plural(result.sessions_updated, 'session')}, "
        f"{plural(result.prompts_updated, 'prompt')} moved"
    )
    emit(args, human, result.to_dict())
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    with open_store() as store:
        result = store.prune_projects(dry_run=args.dry_run)
    if not result.projects:
        human = "Nothing to prune: every project has memories."
    else:
        verb = "Would remove" if args.dry_run else "Removed"
        human = (
            f"{verb} {plural(len(result.projects), 'project')}: {', '.join(result.projects)} "
            f"({plural(result.sessions_deleted, 'session')}, "
            f"{plural(result.prompts_deleted, 'prompt')})"
        )
    emit(args, human, result.to_dict())
    return 0

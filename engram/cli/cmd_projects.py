"""``engram projects list|merge|prune``."""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag, emit, open_store


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
        width = max(len(p.name) for p in projects)
        human = "\n".join(
            f"{p.name.ljust(width)}  {p.observation_count:>6} memories  {p.session_count:>4} "
            f"sessions  {p.prompt_count:>4} prompts"
            for p in projects
        )
    emit(args, human, {"projects": [p.to_dict() for p in projects], "count": len(projects)})
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    with open_store() as store:
        result = store.merge_projects(args.sources, args.to)
    human = (
        f"Merged {', '.join(result.sources_merged)} into {result.canonical}: "
        f"{result.observations_updated} memories, {result.sessions_updated} sessions, "
        f"{result.prompts_updated} prompts moved"
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
            f"{verb} {len(result.projects)} project(s): {', '.join(result.projects)} "
            f"({result.sessions_deleted} sessions, {result.prompts_deleted} prompts)"
        )
    emit(args, human, result.to_dict())
    return 0

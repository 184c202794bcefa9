"""``engram ingest-git`` and ``engram summarize``: memories from git history and learnings
from recent work (thin shells over :mod:`engram.ingest`)."""

from __future__ import annotations

import argparse

from engram import settings
from engram.cli.common import add_json_flag, emit, open_store, wants_json
from engram.text import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest-git",
        help="one memory per recent change set of a git repository",
        description="Read the repository's recent history (first-parent line of HEAD; a merge "
        "and the commits it brought in are one change set) and save one memory per change set "
        "not ingested before. Running it again, or on another machine, adds nothing twice.",
    )
    p.add_argument("--repo", default=".", help="the repository (default: this directory)")
    p.add_argument("--days", type=int, default=30, help="how far back (default 30)")
    p.add_argument("--project", help="project (default: detected from the repository)")
    p.add_argument("--include-bots", action="store_true", help="also dependabot & co.")
    add_json_flag(p)
    p.set_defaults(func=cmd_ingest_git)

    p = sub.add_parser(
        "summarize",
        help="learnings from recent memories and commits, saved as memories",
        description="Extract learnings with Claude when ANTHROPIC_API_KEY is set (model: "
        "ENGRAM_SUMMARIZE_MODEL), else offline from the Learned blocks and Key Learnings "
        "already written. Private text and secrets never leave the machine.",
    )
    p.add_argument("--days", type=int, default=7, help="how far back (default 7)")
    p.add_argument(
        "--min-confidence", type=float, default=0.6, help="keep learnings at or above (0-1)"
    )
    p.add_argument("--project", help="project (default: detected from the directory)")
    p.add_argument("--repo", default=".", help="repository whose commits to read too")
    p.add_argument("--offline", action="store_true", help="never call a model, even with a key")
    p.add_argument("--dry-run", action="store_true", help="show the learnings, save nothing")
    add_json_flag(p)
    p.set_defaults(func=cmd_summarize)


def _project(explicit: str | None, repo: str) -> str:

    from engram.cli.common import resolve_project
    from engram.errors import ProjectResolutionError
    from engram.project import detect_project

    if explicit or settings.raw("ENGRAM_PROJECT"):
        return resolve_project(explicit).project
    detected = detect_project(repo)
    if detected.ambiguous or not detected.project:
        raise ProjectResolutionError(
            f"cannot tell which project {repo} belongs to; pass --project",
            code="ambiguous_project",
            available_projects=detected.available_projects,
        )
    return detected.project


def cmd_ingest_git(args: argparse.Namespace) -> int:
    from engram.cli.progress import factory
    from engram.ingest.git import ingest_git

    project = _project(args.project, args.repo)
    with open_store() as store:
        report = ingest_git(
            store,
            args.repo,
            project,
            days=args.days,
            include_bots=args.include_bots,
            progress=factory(quiet=wants_json(args), min_total=100),
        )
    lines = [
        f"{report.repo} (project {report.project!r}), last {report.days} days: "
        f"{plural(report.commits_read, 'commit')} in {plural(report.change_sets, 'change set')}",
        f"  {plural(len(report.added), 'memory')} added, {report.already_present} already present, "
        f"{plural(report.skipped_bots, 'bot change set')} skipped",
    ]
    lines += [f"  + #{a['id']} {a['sha'][:12]} {a['title']}" for a in report.added[:50]]
    if len(report.added) > 50:
        lines.append(f"  … and {len(report.added) - 50} more")
    lines += [f"warning: {w}" for w in report.warnings]
    emit(args, "\n".join(lines), report.to_dict())
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from engram.ingest.provider import provider_from_env
    from engram.ingest.summarize import summarize

    project = _project(args.project, args.repo)
    provider = None if args.offline else provider_from_env()
    with open_store() as store:
        report = summarize(
            store,
            project,
            days=args.days,
            min_confidence=args.min_confidence,
            provider=provider,
            repo=args.repo,
            dry_run=args.dry_run,
        )
    lines = [
        f"Learnings of project {report.project!r}, last {report.days} days ({report.provider}, "
        f"{report.sources} sources): {report.saved} saved, {report.already_present} already "
        f"saved, {report.below_confidence} below {report.min_confidence}"
    ]
    for item in report.learnings:
        lines.append(f"  [{item['confidence']:.2f}] {item['text']}  ({item['status']})")
    lines += [f"warning: {w}" for w in report.warnings]
    emit(args, "\n".join(lines), report.to_dict())
    return 0

"""Curation commands (docs/importance.md): pin, unpin, importance, validity, archive, restore,
archived, review and consolidate."""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag, emit, open_store


def register(sub: argparse._SubParsersAction) -> None:
    for name, help_text in (
        ("pin", "pin a memory: always in the context, never archived"),
        ("unpin", "unpin a memory"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("id", help="the memory's #id")
        add_json_flag(p)
        p.set_defaults(func=cmd_pin, pinned=name == "pin")

    p = sub.add_parser(
        "importance",
        help="set a memory's importance by hand (0-1), or 'auto' for the computed score",
    )
    p.add_argument("id", help="the memory's #id")
    p.add_argument("value", help="a number from 0 to 1, or auto")
    add_json_flag(p)
    p.set_defaults(func=cmd_importance)

    p = sub.add_parser(
        "validity",
        help="say when a memory was true",
        description="Set when a memory became true and/or stopped being true (YYYY-MM-DD or "
        "ISO 8601; 'none' clears). `engram search --as-of DATE` answers with what was true then.",
    )
    p.add_argument("id", help="the memory's #id")
    p.add_argument("--from", dest="valid_from", help="true since (default: when it was saved)")
    p.add_argument("--to", dest="valid_to", help="no longer true since")
    add_json_flag(p)
    p.set_defaults(func=cmd_validity)

    p = sub.add_parser("archive", help="archive a memory by hand (restorable)")
    p.add_argument("id", help="the memory's #id")
    add_json_flag(p)
    p.set_defaults(func=cmd_archive)

    p = sub.add_parser(
        "restore",
        help="bring back archived or soft-deleted memories",
        description="Bring archived or soft-deleted memories back, here and (through sync) on "
        "every machine: all of them or, when one cannot be restored, none. A hard delete cannot "
        "be undone.",
    )
    p.add_argument("ids", nargs="+", metavar="id", help="the memories' #ids")
    add_json_flag(p)
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("archived", help="list archived memories, most recent first")
    p.add_argument("--project", help="only this project")
    p.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    add_json_flag(p)
    p.set_defaults(func=cmd_archived)

    p = sub.add_parser(
        "review",
        help="memories nobody changed, confirmed or read for a while",
        description="List memories untouched and unread for --days (ENGRAM_REVIEW_AFTER_DAYS, "
        "default 90), stalest first; --mark ID confirms one is still right.",
    )
    p.add_argument("--project", help="only this project")
    p.add_argument("--days", type=int, help="idle for at least this many days")
    p.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    p.add_argument("--mark", metavar="ID", help="confirm memory ID is still right")
    add_json_flag(p)
    p.set_defaults(func=cmd_review)

    p = sub.add_parser(
        "consolidate",
        help="merge near-duplicate memories, archive unimportant ones, re-score the rest",
        description="Re-score every memory, merge near-duplicates into one memory that keeps "
        "every distinct fact (the merged-away ones are archived and superseded), and archive "
        "unpinned memories whose importance is below the threshold. Every change syncs; "
        "archived memories can be restored (engram restore ID). Use --dry-run first.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: every project)")
    where.add_argument("--all", action="store_true", help="every project (the default)")
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    p.add_argument(
        "--max", type=int, dest="max_changes", help="change at most N memories in this run"
    )
    p.add_argument("--threshold", type=float, help="archive below this importance (default 0.1)")
    p.add_argument(
        "--similarity", type=float, help="how alike duplicates must be, 0-1 (default 0.6)"
    )
    p.add_argument(
        "--llm",
        action="store_true",
        help="rewrite merged texts with Claude (ANTHROPIC_API_KEY; off by default)",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_consolidate)


def _changed(args: argparse.Namespace, obs, message: str) -> int:
    from engram import formatting

    emit(args, f"{message}\n{formatting.importance_label(obs)}", obs.to_dict())
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    with open_store() as store:
        obs = store.pin_observation(args.id, args.pinned)
    return _changed(args, obs, f"Memory #{obs.id} {'pinned' if obs.pinned else 'unpinned'}")


def cmd_importance(args: argparse.Namespace) -> int:
    with open_store() as store:
        obs = store.set_importance(args.id, args.value)
    how = "set by hand" if obs.importance_override is not None else "computed again"
    return _changed(args, obs, f"Memory #{obs.id} importance {obs.importance:.2f} ({how})")


def cmd_validity(args: argparse.Namespace) -> int:
    with open_store() as store:
        obs = store.set_validity(args.id, valid_from=args.valid_from, valid_to=args.valid_to)
    until = f" to {obs.valid_to}" if obs.valid_to else " (still true)"
    return _changed(
        args, obs, f"Memory #{obs.id} valid from {obs.valid_from or obs.created_at}{until}"
    )


def cmd_archive(args: argparse.Namespace) -> int:
    with open_store() as store:
        obs = store.archive_observation(args.id)
    emit(
        args,
        f"Memory #{obs.id} archived (engram restore {obs.id} brings it back)",
        {"id": obs.id, "status": "archived"},
    )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    with open_store() as store:
        back = store.restore_observations(args.ids)
    if len(back) == 1:  # the memory itself, like every other curation command
        return _changed(args, back[0], f"Memory #{back[0].id} restored: {back[0].title}")
    human = "\n".join(f"Memory #{o.id} restored: {o.title}" for o in back)
    emit(args, human, {"restored": [o.to_dict() for o in back], "count": len(back)})
    return 0


def cmd_archived(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        found = store.archived_observations(args.project, limit=args.limit)
    emit(
        args,
        formatting.memory_list(found, "No archived memories."),
        [o.to_dict() for o in found],
    )
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        if args.mark:
            obs = store.mark_reviewed(args.mark)
            return _changed(args, obs, f"Memory #{obs.id} confirmed (reviewed {obs.reviewed_at})")
        days = args.days if args.days is not None else store.config.review_after_days
        found = store.needs_review(args.project, days=days, limit=args.limit)
    emit(args, formatting.review_list(found, days), [o.to_dict() for o in found])
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    from engram import formatting
    from engram.cli.common import wants_json

    provider = None
    if args.llm:
        from engram.errors import ValidationError
        from engram.ingest.provider import provider_from_env

        provider = provider_from_env()
        if provider is None:
            raise ValidationError("--llm needs ANTHROPIC_API_KEY; nothing was changed")
    progress = None if wants_json(args) else _progress()
    with open_store() as store:
        report = store.consolidate(
            None if args.all else args.project,
            dry_run=args.dry_run,
            max_changes=args.max_changes,
            threshold=args.threshold,
            similarity=args.similarity,
            merge_provider=provider,
            progress=progress,
        )
    emit(args, formatting.consolidation(report), report.to_dict())
    return 0


def _progress():
    """A line on stderr per stage of a long consolidation (only on a terminal)."""
    import sys
    import time

    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done == total:
            last[0] = now
            sys.stderr.write(f"\r  {stage}: {done}/{total}   ")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    return show

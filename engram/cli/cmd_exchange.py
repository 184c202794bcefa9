"""``engram export`` and ``engram import``: JSON backups that any Engram can read back."""

from __future__ import annotations

import argparse
import sys

from engram.cli.common import add_json_flag, dumps, emit, open_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write every memory to a JSON file (or stdout)",
        description="Export sessions, memories (soft-deleted ones included) and prompts as JSON.",
    )
    p.add_argument("file", nargs="?", help="output file (default: standard output)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project")
    where.add_argument("--all", action="store_true", help="every project (the default)")
    p.add_argument(
        "--canonical",
        action="store_true",
        help="the canonical form used to compare replicas (no local ids)",
    )
    p.add_argument(
        "--format",
        choices=("json", "go"),
        default="json",
        help="'go': the Go tool's export, for `engram-go import` (the way back to the Go tool; "
        "see docs/git-sync.md)",
    )
    p.add_argument(
        "--missing-from",
        metavar="GO_DB",
        help="with --format go: only what the Go tool's database GO_DB (the backup the upgrade "
        "kept) lacks and no Go-format chunk in your repositories brings it",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        help="import a JSON export (idempotent)",
        description="Import an export file ('-' for standard input). Rows whose sync id already "
        "exists are skipped, so importing twice changes nothing. All or nothing.",
    )
    p.add_argument("file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(p)
    p.set_defaults(func=cmd_import)


def cmd_export(args: argparse.Namespace) -> int:
    from engram.errors import ValidationError

    if args.canonical and args.format != "json":
        raise ValidationError("--canonical has a format of its own; drop --format")
    if args.missing_from and args.format != "go":
        raise ValidationError("--missing-from is for the way back to the Go tool: add --format go")
    with open_store() as store:
        if args.canonical:
            projects = None if args.all or not args.project else [args.project]
            payload = store.canonical_export(projects=projects)
            counts = None
        else:
            data = store.export_data(None if args.all else args.project)
            if args.missing_from:
                from pathlib import Path

                from engram.way_back import missing_from

                data = missing_from(store, data, Path(args.missing_from))
            if args.format == "go":
                from engram.sync.git.go_writer import go_export

                payload = go_export(data)
            else:
                payload = dumps(data).encode() + b"\n"
            counts = {k: len(data[k]) for k in ("sessions", "observations", "prompts")}
    if not args.file or args.file == "-":
        sys.stdout.buffer.write(payload if payload.endswith(b"\n") else payload + b"\n")
        return 0
    from engram.platform import open_private

    with open_private(args.file) as handle:  # every memory: private like the database
        handle.write(payload)
    summary = {"file": args.file, **(counts or {})}
    human = f"Exported to {args.file}"
    if counts:
        human += (
            f": {counts['sessions']} sessions, {counts['observations']} observations, "
            f"{counts['prompts']} prompts"
        )
    emit(args, human, summary)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import orjson

    from engram.errors import ValidationError

    raw = sys.stdin.buffer.read() if args.file == "-" else open(args.file, "rb").read()  # noqa: SIM115
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"{args.file} is not valid JSON ({exc}); nothing imported") from None
    from engram.cli.common import wants_json
    from engram.cli.progress import progress_bar

    total = (
        sum(len(data.get(k) or []) for k in ("sessions", "observations", "prompts"))
        if isinstance(data, dict)
        else 0
    )
    with (
        open_store() as store,
        progress_bar("Importing", total, quiet=args.quiet or wants_json(args)) as advance,
    ):
        done = 0

        def progress(count: int, _total: int) -> None:
            nonlocal done
            advance(count - done)
            done = count

        result = store.import_data(data, progress=progress)
    human = (
        f"Imported from {args.file}: {result.sessions_imported} sessions, "
        f"{result.observations_imported} observations, {result.prompts_imported} prompts"
        + (f" ({result.skipped} already present, skipped)" if result.skipped else "")
        + (
            f"\n{result.copies_retired} of them were memories of this store that came back "
            "through the Go tool (it keeps no sync_id): kept once"
            if result.copies_retired
            else ""
        )
    )
    emit(args, human, result.to_dict())
    return 0

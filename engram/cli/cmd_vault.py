"""``engram vault export|sync``: memories as a Markdown vault (a thin shell over
:class:`engram.vault.VaultSync`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from engram.cli.common import add_json_flag, emit, open_store, resolve_project, wants_json

if TYPE_CHECKING:
    from engram.vault import VaultReport


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "vault",
        help="memories as Markdown notes (Obsidian): export, then sync both ways",
        description="A vault is a directory of Markdown notes, one per memory of one project. "
        "Edit or create notes in any editor, then 'engram vault sync DIR' turns the changes "
        "into ordinary edits (which git and cloud sync share) and refreshes notes from the "
        "store.",
    )
    actions = parser.add_subparsers(dest="vault_command", metavar="<action>", required=True)

    p = actions.add_parser("export", help="write the notes of a project's memories into DIR")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--project", help="project (default: detected from the directory)")
    p.add_argument(
        "--include-personal",
        action="store_true",
        help="also personal-scope memories (by default only shared ones)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be written")
    add_json_flag(p)
    p.set_defaults(func=cmd_export)

    p = actions.add_parser("sync", help="apply note edits to the store and store changes to notes")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--project", help="fail unless DIR is this project's vault")
    p.add_argument("--dry-run", action="store_true", help="report, change nothing")
    p.add_argument(
        "--apply-deletes",
        action="store_true",
        help="archive the memories whose notes were deleted (by default only reported)",
    )
    p.add_argument(
        "--prefer",
        choices=["note", "store"],
        help="settle conflicts (note and memory both changed): which version wins",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_sync)


def _progress(args: argparse.Namespace):
    from engram.cli.progress import factory

    return factory(quiet=wants_json(args), min_total=500)


def cmd_export(args: argparse.Namespace) -> int:
    from engram.vault import VaultSync

    project = resolve_project(args.project).project
    with open_store() as store:
        report = VaultSync(store, args.directory, progress=_progress(args)).export(
            project, include_personal=args.include_personal, dry_run=args.dry_run
        )
    emit(args, describe(report, "export"), report.to_dict())
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from engram.vault import VaultSync

    with open_store() as store:
        report = VaultSync(store, args.directory, progress=_progress(args)).sync(
            dry_run=args.dry_run,
            apply_deletes=args.apply_deletes,
            prefer=args.prefer,
            project=args.project,
        )
    emit(args, describe(report, "sync"), report.to_dict())
    # Conflicts are not errors (nothing was lost) but scripts should notice them.
    return 3 if report.conflicts else 0


def describe(report: VaultReport, action: str) -> str:
    """The human summary: counts, then each event that needs a person's attention."""
    import difflib

    would = "would be " if report.dry_run else ""
    dry = " — dry run" if report.dry_run else ""
    lines = [f"Vault {report.directory} (project {report.project!r}){dry}"]
    counts = [
        (len(report.written), f"notes {would}written from the store"),
        (len(report.archived_notes), f"notes {would}moved to .archive/"),
        (len(report.removed_notes), f"notes {would}removed (memory gone from the store)"),
        (len(report.created), f"memories {would}created from new notes"),
        (len(report.updated), f"memories {would}updated from edited notes"),
        (len(report.archived), f"memories {would}archived (their notes were deleted)"),
        (report.unchanged, "notes unchanged"),
    ]
    lines += [f"  {n} {text}" for n, text in counts if n]
    if not report.changed and not report.unchanged:
        lines.append("  nothing to do")
    for event in report.created + report.updated:
        ident = f"#{event.id} " if event.id is not None else ""
        lines.append(f"  + {event.path}  {ident}{event.detail}".rstrip())
    if report.pending_edits:
        lines.append(
            f"{len(report.pending_edits)} notes have edits or are new: 'engram vault sync "
            f"{report.directory}' applies them"
        )
        lines += [f"  ~ {e.path} ({e.detail})" for e in report.pending_edits]
    if report.missing:
        lines.append(
            f"{len(report.missing)} notes were deleted; their memories are kept. "
            "'--apply-deletes' archives them, 'engram vault export' writes the notes again:"
        )
        lines += [f"  - {e.path} (#{e.id})" for e in report.missing]
    for event in report.skipped:
        lines.append(f"skipped {event.path}: {event.detail}")
    lines += [f"warning: {w}" for w in report.warnings]
    if report.conflicts:
        lines.append(
            f"{len(report.conflicts)} conflicts (note and memory both changed); nothing was "
            "overwritten. Edit the note to the version you want, or run again with "
            "--prefer note | --prefer store:"
        )
        for conflict in report.conflicts:
            lines.append(f"! {conflict.path} (#{conflict.id}, {conflict.reason})")
            store_text = _as_text(conflict.store).splitlines()
            note_text = _as_text(conflict.note).splitlines()
            diff = difflib.unified_diff(store_text, note_text, "store", "note", lineterm="")
            lines += [f"    {line}" for line in diff]
    return "\n".join(lines)


def _as_text(version: dict) -> str:
    if not version:
        return ""
    head = f"title: {version.get('title')}\ntype: {version.get('type')}\n"
    head += f"topic: {version.get('topic_key')}\n"
    return head + str(version.get("content") or "")

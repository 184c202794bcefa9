"""``engram sync``: share memories through the repository's ``.engram/`` directory.

``engram sync`` exports, ``--import`` applies what teammates pushed, ``--status`` reports. The
command picks a *transport* (git, or the cloud with ``--cloud``) and an *action*; each pair has its own handler in
``HANDLERS``; ``--cloud`` (or ``ENGRAM_CLOUD_SYNC=1``) picks the cloud client's three handlers
(:mod:`engram.cli.cloud_client_commands`). ``--bind``, ``--unbind`` and ``--accept-config``
are git-only: they record which projects a sync directory may write on this machine.
``--go-compat`` (git export only) also writes for teammates still on the Go tool; ``on``/``off``
remember that for the directory on this machine.

Size: over 500 lines on purpose: the command's parser and every git handler with the human text
it prints, each short; the cloud handlers already live in their own module.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from engram import settings
from engram.cli.common import (
    add_json_flag,
    emit,
    open_store,
    resolve_project,
    say,
    wants_json,
    warn,
)
from engram.text import plural

if TYPE_CHECKING:
    from engram.sync.git.sync import ChunkProblem, GitSync


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sync",
        help="share memories through git (.engram/ chunks)",
        description="Export this project's new memories, edits and deletes as a chunk under "
        ".engram/ (commit and push it), import the chunks teammates pushed (--import), or "
        "show what is where (--status).",
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument(
        "--import",
        dest="import_",
        action="store_true",
        help="apply every chunk in the directory not applied yet",
    )
    action.add_argument("--status", action="store_true", help="chunks here, applied, pending")
    action.add_argument(
        "--bind",
        metavar="PROJECT",
        help="let this directory's chunks write PROJECT on this machine (the next --import "
        "applies what it held back)",
    )
    action.add_argument(
        "--unbind", metavar="PROJECT", help="withdraw a --bind (or an accepted config suggestion)"
    )
    action.add_argument(
        "--accept-config",
        action="store_true",
        help="accept the project named by the repository's .engram/config.json on this machine "
        "(for saves, imports and exports)",
    )
    action.add_argument(
        "--quarantine",
        action="store_true",
        help="list the records kept aside: received ones that cannot be applied (yet), and "
        "ones a server rejected (with --retry or --discard: act on them)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="project to export (default: detected from the directory)")
    where.add_argument("--all", action="store_true", help="export every project")
    p.add_argument(
        "--dir",
        help="sync directory (default: .engram/ at the top of the git repository)",
    )
    p.add_argument(
        "--include-personal",
        action="store_true",
        help="also export (or, with --import, apply) personal-scope memories; without it they "
        "never leave this machine and are never applied from elsewhere",
    )
    p.add_argument(
        "--go-compat",
        nargs="?",
        const="once",
        choices=("on", "off", "once"),
        metavar="on|off",
        help="also write new memories, sessions and prompts of the repository's project as Go "
        "tool chunks (listed in its manifest.json) so teammates still on the Go tool receive "
        "them; its format carries creations only. 'on'/'off' remember it for this repository "
        "on this machine",
    )
    p.add_argument(
        "--cloud",
        action="store_true",
        help="push to (or with --import pull from) the cloud server instead of git "
        "(also ENGRAM_CLOUD_SYNC=1)",
    )
    handle = p.add_mutually_exclusive_group()
    handle.add_argument(
        "--retry",
        action="store_true",
        help="with --quarantine: check the received records again now and put the rejected "
        "ones back in the push queue",
    )
    handle.add_argument(
        "--discard",
        action="store_true",
        help="with --quarantine: drop the quarantined records (of --project, else all)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    add_json_flag(p)
    p.set_defaults(func=cmd_sync)


def _selection(args: argparse.Namespace) -> list[str] | None:
    return None if args.all else [resolve_project(args.project).project]


def _describe(projects: list[str] | None) -> str:
    return "all projects" if projects is None else f'project "{projects[0]}"'


def _git(args: argparse.Namespace, store) -> GitSync:
    from engram.cli.progress import factory
    from engram.sync.git.gitdir import locate
    from engram.sync.git.sync import GitSync

    quiet = args.quiet or wants_json(args)
    return GitSync(store, locate(args.dir), progress=factory(quiet=quiet))


def _warn(problems: list[ChunkProblem] | list[str]) -> None:
    for problem in problems:
        warn(str(problem))


def _scope_lines(scope: dict[str, Any], shown: str) -> list[str]:
    """Which projects the directory may write here, and a config suggestion waiting."""
    sources = {}
    if scope.get("detected"):
        from engram.sync.git.scope import describe_source

        sources[scope["detected"]] = describe_source(str(scope.get("detected_source")))
    if scope.get("accepted_config"):
        sources.setdefault(scope["accepted_config"], "config.json, accepted")
    for name in scope.get("bound") or []:
        sources.setdefault(name, "bound")
    lines = [
        "  Projects here:   "
        + (", ".join(f"{name} ({why})" for name, why in sorted(sources.items())) or "none")
    ]
    if scope.get("suggested_project"):
        lines.append(
            f"  Suggestion:      {os.path.join(shown, 'config.json')} suggests project "
            f'"{scope["suggested_project"]}", not accepted here: '
            "`engram sync --accept-config` accepts it"
        )
    return lines


def git_export(args: argparse.Namespace) -> int:
    projects = _selection(args)
    if not wants_json(args):
        if projects is None:
            say("Exporting ALL memories (all projects)...")
        else:
            say(f'Exporting memories for project "{projects[0]}"...')
    with open_store() as store:
        sync = _git(args, store)
        go_compat = None
        if args.go_compat is not None:
            if args.go_compat in ("on", "off"):
                sync.set_go_compat(args.go_compat == "on")
                if not wants_json(args):
                    say(
                        "Go compat on: every engram sync here also writes for Go teammates "
                        "(`engram sync --go-compat off` stops it)"
                        if args.go_compat == "on"
                        else "Go compat off: engram sync here writes only our own chunks"
                    )
            go_compat = args.go_compat != "off"
        report = sync.export(
            projects=projects, include_personal=args.include_personal, go_compat=go_compat
        )
        shown = sync.dir.display()
        tracked = sync.dir.in_repository()
        unknown = (
            projects[0] if projects is not None and not store.project_exists(projects[0]) else None
        )
        known = store.project_names() if unknown is not None else []
    _warn(report.problems)
    _warn(report.warnings)
    data = report.to_dict()
    tending = _tending_lines(report, shown)
    if report.nothing_new:
        human = (
            f"Nothing new to sync — every mutation of {_describe(projects)} is already in {shown}"
        )
        if unknown is not None:
            human = (
                f'Nothing to sync: this machine has no memories of project "{unknown}"'
                f" (projects here: {', '.join(known) or 'none'}; use --project NAME or --all)"
            )
        if report.go_compat and report.go_project and not report.go_chunks:
            human += (
                f'\nGo teammates already have every memory of project "{report.go_project}" '
                "(no Go-format chunk needed)"
            )
        if tending:
            human += "\n" + "\n".join([*tending, "", *_add_to_git(shown, tracked)])
        emit(args, human, data)
        return 0
    lines: list[str] = []
    ids = [c.id for c in report.chunks]
    if ids:
        lines.append(
            f"Created chunk {ids[0]}"
            if len(ids) == 1
            else f"Created {len(ids)} chunks: " + ", ".join(ids)
        )
        lines += [
            f"  Sessions:     {data['sessions']}",
            f"  Observations: {data['observations']}",
            f"  Prompts:      {data['prompts']}",
            *([f"  Relations:    {data['relations']}"] if data["relations"] else []),
            f"  Mutations:    {data['mutations']}",
        ]
    if report.go_chunks:
        from engram.sync.git.go_compat import CREATIONS_ONLY

        go_ids = ", ".join(c.id for c in report.go_chunks)
        lines += [
            f"For Go teammates: Go-format {'chunk' if len(report.go_chunks) == 1 else 'chunks'} "
            f'{go_ids} of project "{report.go_project}", '
            "listed in manifest.json",
            f"  Sessions:     {sum(c.sessions for c in report.go_chunks)}",
            f"  Observations: {sum(c.observations for c in report.go_chunks)}",
            f"  Prompts:      {sum(c.prompts for c in report.go_chunks)}",
            f"  Note: {CREATIONS_ONLY}.",
        ]
    lines += [*tending, "", *_add_to_git(shown, tracked)]
    emit(args, "\n".join(lines), data)
    return 0


def _add_to_git(shown: str, tracked: bool) -> list[str]:
    """How to share the chunks: commit them, or (no repository here) say there is none."""
    if tracked:
        return ["Add to git:", f'  git add {shown} && git commit -m "sync engram memories"']
    return [
        f"{shown} is not in a git repository: share it your own way, or run engram sync "
        "inside the repository (or pass --dir)."
    ]


def _tending_lines(report, shown: str) -> list[str]:
    """What an export changed besides writing chunks (layout, the Go manifest)."""
    lines = []
    if report.moved:
        lines.append(
            f"Moved {plural(len(report.moved), 'chunk')} an earlier Engram wrote into chunks/ to log/, "
            "where the Go tool never reads"
        )
    change = report.manifest
    if change.repaired:
        what = "git conflict markers" if change.repaired == "conflicted" else "invalid JSON"
        lines.append(
            f"Repaired manifest.json ({what}): every entry of both sides kept, in the Go tool's "
            "format"
        )
    if change.removed:
        lines.append(
            f"Took {len(change.removed)} entr{'y' if len(change.removed) == 1 else 'ies'} of our "
            "chunks out of manifest.json (the Go tool cannot read them)"
        )
    if change.relisted:
        lines.append(
            f"Listed {plural(len(change.relisted), 'Go chunk file')} again that a merge had dropped from "
            "manifest.json"
        )
    for path in change.nested_repaired:
        lines.append(f"Repaired {path} (git left it unreadable)")
    return lines


def git_import(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        sync = _git(args, store)
        if args.dir and not sync.dir.exists():
            from engram.errors import NotFoundError

            raise NotFoundError(f"no sync directory at {sync.dir.path}")
        report = sync.import_chunks(include_personal=args.include_personal)
        shown = sync.dir.display()
    data = report.to_dict()
    lines: list[str] = []
    for warning in report.warnings:
        lines.append(f"Note: {warning}")
    for path in _repaired(report.manifest, shown):
        lines.append(
            f"{path} had git conflict markers and was repaired (every entry of both sides "
            f"kept, in the Go tool's format): 'git add {path}' to finish the merge."
        )
    if not report.chunks_imported and not report.chunks_reread and not report.failures:
        lines.append("Already up to date — no new chunks to import.")
        if report.chunks_already:
            lines.append(f"({plural(report.chunks_already, 'chunk')} already imported)")
    if report.chunks_imported or report.chunks_reread:
        applied = report.applied
        head = f"Imported {plural(len(report.chunks_imported), 'new chunk')} from {shown}"
        if report.go_dirs:  # the Go tool's directories elsewhere in the repository
            head += " and " + ", ".join(f"{path}/" for path in report.go_dirs)
        if report.chunks_reread:
            head += f" and re-read {len(report.chunks_reread)} for records accepted since"
        lines += [
            head,
            f"  Sessions:     {applied.sessions} change(s)",
            f"  Observations: {applied.observations} change(s)",
            f"  Prompts:      {applied.prompts} change(s)",
            f"  Relations:    {applied.relations} change(s)",
            f"  Unchanged:    {applied.duplicates} already here, {applied.stale} older than local",
            f"Skipped: {report.chunks_already} (already imported)",
        ]
        if report.skipped_relations:
            lines.append(
                f"Skipped {report.skipped_relations} mutation(s) of entities this version does "
                "not know"
            )
    lines += formatting.superseded(report.applied)
    if report.held:
        lines.append(f"Not applied on this machine (the chunks stay in {shown}):")
        lines += [f"  {held}" for held in report.held]
    if report.scope.get("suggested_project"):
        lines += _scope_lines(report.scope, shown)[1:]
    if report.applied.quarantined:
        held = ", ".join(f"{n} {why}" for why, n in sorted(report.applied.quarantined.items()))
        lines.append(f"Quarantined: {held} (engram sync --quarantine lists them)")
    if report.failures:
        lines.append(
            f"Failed: {len(report.failures)} chunk(s) not applied (nothing of them was "
            "written; the next import tries again unless a chunk was refused for its size):"
        )
        lines += [f"  {failure}" for failure in report.failures]
    emit(args, "\n".join(lines), data)
    if report.failures and not wants_json(args):
        warn(f"{len(report.failures)} chunk(s) could not be imported", kind="error")
    return 1 if report.failures else 0


def _repaired(change, shown: str) -> list[str]:
    """The Go manifests a sync repaired, as paths a human types."""
    paths = [os.path.join(shown, "manifest.json")] if change.repaired else []
    top = os.path.dirname(os.path.normpath(shown))
    return paths + [os.path.join(top, path) for path in change.nested_repaired]


def git_status(args: argparse.Namespace) -> int:
    projects = _selection(args)
    with open_store() as store:
        sync = _git(args, store)
        if args.dir and not sync.dir.exists():
            from engram.errors import NotFoundError

            raise NotFoundError(f"no sync directory at {sync.dir.path}")
        report = sync.status(projects=projects, include_personal=args.include_personal)
        shown = sync.dir.display()
        from engram.cli.sync_quarantine import summary

        held = summary(store, projects)
        counts = store.quarantine_counts(projects)
    lines = [
        f"Sync status ({shown}):",
        f"  Local chunks:    {report.applied}",
        f"  Remote chunks:   {report.chunks}",
        f"  Pending import:  {len(report.pending_import)}",
        f"  Pending export:  {report.pending_export} mutation(s) of {_describe(projects)}",
        f"  Our index:       {report.index}"
        + ("" if report.index == "ok" else " (rewritten by the next engram sync)"),
        f"  Go manifest:     {report.manifest}" + _MANIFEST_NOTES.get(report.manifest, ""),
        f"  Go chunks:       {report.go_chunks}"
        + (f" (also in {', '.join(report.go_dirs)})" if report.go_dirs else ""),
        "  Go compat:       "
        + ("on (engram sync also writes for Go teammates)" if report.go_compat else "off"),
        *(
            [
                f"  Old layout:      {report.old_layout} chunk(s) in chunks/ (moved to log/ by "
                "the next engram sync)"
            ]
            if report.old_layout
            else []
        ),
        *_scope_lines(report.scope, shown),
        *[f"  Held back:       {held}" for held in report.held],
    ]
    if report.chunks:
        who = ", ".join(
            f"{name} ({plural(count, 'chunk')})" for name, count in report.contributors.items()
        )
        if report.project_memories is None:  # --all: the chunks' totals are the answer
            inside = f"{plural(report.memories, 'memory')}, {plural(report.sessions, 'session')}"
        else:
            # the headers count every project's: the selected one's are counted from what
            # this machine exported there or imported from there
            so_far = " imported so far" if report.pending_import else ""
            inside = (
                f"{plural(report.project_memories, 'memory')} of {_describe(projects)}{so_far} "
                f"(all projects: {plural(report.memories, 'memory')})"
            )
        lines.append(f"{plural(report.chunks, 'chunk')}, {inside} — contributors: {who}")
    else:
        lines.append("No chunks synced yet.")
    lines += [f"  problem: {p}" for p in report.problems]
    if held:
        lines.append(held)
    emit(args, "\n".join(lines), {**report.to_dict(), "quarantine": counts})
    return 0


_MANIFEST_NOTES = {
    "conflicted": " (repaired by the next engram sync; the Go tool cannot read it)",
    "invalid": " (repaired by the next engram sync; the Go tool cannot read it)",
    "lists-ours": " (an earlier Engram listed its chunks there; the next engram sync takes them "
    "out)",
}


def git_bind(args: argparse.Namespace) -> int:
    from engram.project import project_name

    with open_store() as store:
        sync = _git(args, store)
        added = sync.bind(args.bind)
        scope = sync.scope()
        shown = sync.dir.display()
    name = project_name(args.bind)
    human = (
        f'Bound project "{name}" to {shown} on this machine: `engram sync --import` applies '
        "its records, including those held back before."
        if added
        else f'Project "{name}" was already bound to {shown} on this machine.'
    )
    emit(args, human, {**scope.to_dict(), "directory": str(sync.dir.path), "added": added})
    return 0


def git_unbind(args: argparse.Namespace) -> int:
    from engram.project import project_name

    with open_store() as store:
        sync = _git(args, store)
        removed = sync.unbind(args.unbind)
        scope = sync.scope()
        shown = sync.dir.display()
    name = project_name(args.unbind)
    human = (
        f'Project "{name}" is no longer bound to {shown} on this machine: imports hold its '
        "new records back (what was applied stays)."
        if removed
        else f'Project "{name}" was not bound to {shown}: nothing to do.'
    )
    emit(args, human, {**scope.to_dict(), "directory": str(sync.dir.path), "removed": removed})
    return 0


def git_accept_config(args: argparse.Namespace) -> int:
    from engram.project import find_config_suggestion

    with open_store() as store:
        sync = _git(args, store)
        folder = None
        if not args.dir:  # the suggestion project detection meets here, wherever it lives
            found = find_config_suggestion()
            folder = found.sync_dir if found is not None else None
        accepted = sync.accept_config(folder)
    human = (
        f'Accepted {accepted.sync_dir / "config.json"}: project "{accepted.project}" on this '
        f"machine. Memories saved in {accepted.base} go to it, and the git sync of "
        f"{accepted.sync_dir} imports and exports it. (A later change of that file is a new "
        "suggestion, accepted the same way.)"
    )
    data = {"accepted": accepted.project, "config": str(accepted.sync_dir / "config.json")}
    emit(args, human, data)
    return 0


#: (transport, action) → handler. A new transport adds its flag and its three handlers here.
HANDLERS = {
    ("git", "export"): git_export,
    ("git", "import"): git_import,
    ("git", "status"): git_status,
    ("git", "bind"): git_bind,
    ("git", "unbind"): git_unbind,
    ("git", "accept-config"): git_accept_config,
}


def _action(args: argparse.Namespace) -> str:
    if args.import_:
        return "import"
    if args.status:
        return "status"
    if args.bind is not None:
        return "bind"
    if args.unbind is not None:
        return "unbind"
    if args.accept_config:
        return "accept-config"
    return "export"


def cmd_sync(args: argparse.Namespace) -> int:
    if args.retry or args.discard or args.quarantine:
        from engram.cli.sync_quarantine import cmd_quarantine
        from engram.errors import ValidationError

        if not args.quarantine:
            raise ValidationError("--retry and --discard act on the quarantine: add --quarantine")
        return cmd_quarantine(args)  # both transports' records, one list
    action = _action(args)
    if args.go_compat is not None and (action != "export" or args.cloud):
        from engram.errors import ValidationError

        raise ValidationError(
            "--go-compat is about what `engram sync` (git export) writes; drop it"
            + (" or --cloud" if args.cloud else f" or --{action}")
        )
    if action in ("bind", "unbind", "accept-config"):
        if args.cloud:
            from engram.errors import ValidationError

            raise ValidationError(f"--{action} is about git sync directories; drop --cloud")
        return HANDLERS[("git", action)](args)
    cloud = args.cloud or settings.raw("ENGRAM_CLOUD_SYNC") == "1"
    if cloud:
        from engram.cli.cloud_client_commands import SYNC_HANDLERS

        return SYNC_HANDLERS[("cloud", action)](args)
    return HANDLERS[("git", action)](args)

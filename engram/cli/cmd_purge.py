"""``engram purge``: remove every trace of hard-deleted text from the database files, and the
background purge the CLI starts after commands that hard-deleted something."""

from __future__ import annotations

import argparse
import sys

from engram.cli.common import add_json_flag, emit, open_store, wants_json
from engram.errors import EngramError

#: Commands that may hard-delete (locally, or by applying deletes from git or the cloud).
PURGE_AFTER = frozenset({"delete", "projects", "sync", "cloud"})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "purge",
        help="remove hard-deleted text from the database files for good",
        description="After hard deletes, merge the full-text indexes, zero freed space and "
        "truncate the write-ahead log, so no byte of deleted text remains in engram.db, "
        "engram.db-wal or engram.db-shm. Runs by itself in the background after commands that "
        "hard-delete (ENGRAM_AUTO_PURGE=0 turns that off). Git history and copies on other "
        "machines are not touched.",
    )
    p.add_argument(
        "--if-pending", action="store_true", help="do nothing unless something was hard-deleted"
    )
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_json_flag(p)
    p.set_defaults(func=cmd_purge)


def cmd_purge(args: argparse.Namespace) -> int:
    def say(message: str) -> None:
        if not args.quiet and not wants_json(args) and sys.stderr.isatty():
            sys.stderr.write(f"engram purge: {message}…\n")

    with open_store() as store:
        if args.if_pending and not store.purge_pending():
            emit(args, None if args.quiet else "Nothing to purge", {"purged": False})
            return 0
        report = store.purge(progress=say)
        path = store.path
    steps = (
        "write-ahead log truncated"
        if report.wal_truncated
        else ("write-ahead log NOT truncated (another process kept reading; run it again)")
    )
    human = (
        f"Purged {path}: full-text indexes merged, {steps}"
        f"{', file rebuilt (VACUUM)' if report.vacuumed else ''}; "
        f"{report.bytes_before / 1e6:.1f} MB → {report.bytes_after / 1e6:.1f} MB "
        f"in {report.seconds:.1f} s"
    )
    emit(args, None if args.quiet else human, {"purged": True, **report.to_dict()})
    return 0 if report.wal_truncated else 1


def purge_in_background(args: argparse.Namespace) -> None:
    """After a command that may have hard-deleted: if something is left to purge, start
    ``engram purge --if-pending`` detached, so this command returns at once."""
    if getattr(args, "command", None) not in PURGE_AFTER:
        return
    import subprocess

    from engram import settings as config_module

    try:
        config = config_module.load()
        if not config.auto_purge or not config.db_path.exists():
            return
        with open_store() as store:
            if not store.purge_pending():
                return
        subprocess.Popen(
            [sys.executable, "-m", "engram", "purge", "--if-pending", "--quiet"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except (EngramError, OSError, ValueError):
        pass  # the command itself succeeded; `engram purge` can always be run by hand

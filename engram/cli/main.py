"""Entry point of the ``engram`` command: builds the parser from the ``cmd_*`` modules and runs
the chosen handler, mapping errors to one line on stderr and a non-zero exit — or, with
``--json``, to one ``{"error": ...}`` object on stdout (usage errors included) and nothing on
stderr, so a script reads every outcome from one stream."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from engram import __version__
from engram.cli.common import add_json_flag, dumps, wants_json, warn
from engram.errors import EngramError, ProjectResolutionError

EXIT_ERROR = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line argparse refused: its message and the usage of the (sub)command."""

    def __init__(self, prog: str, message: str, usage: str) -> None:
        super().__init__(f"{prog}: {message}")
        self.prog = prog
        self.message = message
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are raised (as :class:`UsageError`) instead of
    printed, so :func:`main` reports them like every other error (as JSON with ``--json``).
    Subcommand parsers are of this class too (argparse builds them from the parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message, self.format_usage())


#: The module that registers each command. Running a command builds only its module's parser:
#: agents and hooks start ``engram save``/``search`` as a new process per call, and building
#: every command's parser (the cloud server's included) was a third of their start-up. Any
#: other first word (none, ``--help``, a typo) builds them all. tests/cli/test_main.py checks
#: this against what the modules register.
COMMAND_MODULES = {
    "cloud": "cmd_cloud", "doctor": "cmd_doctor", "export": "cmd_exchange",
    "import": "cmd_exchange", "hub": "cmd_hub", "ingest-git": "cmd_ingest",
    "summarize": "cmd_ingest", "mcp": "cmd_mcp", "setup": "cmd_mcp", "protocol": "cmd_mcp",
    "save": "cmd_memory", "search": "cmd_memory", "get": "cmd_memory", "context": "cmd_memory",
    "list": "cmd_memory", "history": "cmd_memory",
    "timeline": "cmd_memory", "stats": "cmd_memory", "vectorize": "cmd_memory",
    "delete": "cmd_memory", "version": "cmd_memory", "projects": "cmd_projects",
    "purge": "cmd_purge", "serve": "cmd_serve", "sync": "cmd_sync", "tui": "cmd_tui",
    "vault": "cmd_vault", "archive": "cmd_curate", "archived": "cmd_curate",
    "consolidate": "cmd_curate", "importance": "cmd_curate", "pin": "cmd_curate",
    "restore": "cmd_curate", "review": "cmd_curate", "unpin": "cmd_curate",
    "validity": "cmd_curate", "graph": "cmd_graph",
}  # fmt: skip


def command_modules() -> list[str]:
    """Every ``cmd_*`` module of the CLI, sorted."""
    import pkgutil

    import engram.cli as package

    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("cmd_")
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``engram`` parser: with ``command``, only the module registering it, else all."""
    parser = Parser(
        prog="engram",
        description="Persistent memory for AI coding agents (local SQLite, full-text search).",
        epilog="Data lives in $ENGRAM_DATA_DIR (default ~/.engram). "
        "Run 'engram <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"engram {__version__}")
    add_json_flag(parser)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    names = [COMMAND_MODULES[command]] if command in COMMAND_MODULES else command_modules()
    for name in names:
        importlib.import_module(f"engram.cli.{name}").register(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first word that is not a top-level flag)."""
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return None
        if not word.startswith("-"):
            return word
    return None


def report_error(args: argparse.Namespace | None, exc: BaseException) -> None:
    """One line on stderr, or with ``--json`` the error object on stdout only."""
    message = str(exc) or exc.__class__.__name__
    if args is not None and wants_json(args):
        data: dict[str, object] = {"error": message}
        if isinstance(exc, ProjectResolutionError):
            data.update(error_code=exc.code, available_projects=exc.available_projects)
        sys.stdout.write(dumps(data) + "\n")
        return
    warn(message, kind="error")


def json_requested(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (before a ``--``), read before parsing: a
    command line argparse refuses has no parsed flags to ask."""
    words = list(argv)
    if "--" in words:
        words = words[: words.index("--")]
    return "--json" in words


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(words))
    try:
        args = parser.parse_args(words)
    except UsageError as exc:
        if json_requested(words):
            sys.stdout.write(dumps({"error": str(exc), "usage": exc.usage.strip()}) + "\n")
        else:
            sys.stderr.write(exc.usage)
            sys.stderr.write(f"{exc.prog}: error: {exc.message}\n")  # argparse's own form
        return EXIT_USAGE
    handler = getattr(args, "func", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = int(handler(args) or 0)
        if code == 0:
            from engram.cli.cmd_purge import purge_in_background

            purge_in_background(args)
        return code
    except EngramError as exc:
        report_error(args, exc)
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("engram: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        report_error(args, exc)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())

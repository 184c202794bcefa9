"""Entry point of the ``engram`` command: builds the parser from the ``cmd_*`` modules and runs
the chosen handler, mapping errors to one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from engram import __version__
from engram.cli.common import add_json_flag, dumps, wants_json, warn
from engram.errors import EngramError, ProjectResolutionError

EXIT_ERROR = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="engram",
        description="Persistent memory for AI coding agents (local SQLite, full-text search).",
        epilog="Data lives in $ENGRAM_DATA_DIR (default ~/.engram). "
        "Run 'engram <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"engram {__version__}")
    add_json_flag(parser)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    import engram.cli as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"engram.cli.{info.name}")
            module.register(sub)
    return parser


def report_error(args: argparse.Namespace | None, exc: BaseException) -> None:
    message = str(exc) or exc.__class__.__name__
    if args is not None and wants_json(args):
        data: dict[str, object] = {"error": message}
        if isinstance(exc, ProjectResolutionError):
            data.update(error_code=exc.code, available_projects=exc.available_projects)
        sys.stdout.write(dumps(data) + "\n")
    warn(message, kind="error")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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

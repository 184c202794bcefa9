"""What every command shares: opening the store, resolving the project, printing human text or
``--json``, and turning errors into one clear line and an exit code.

Human text goes through :func:`engram.terminal.for_terminal` here, once for every command:
memories, chunk headers and server messages are shown, never obeyed by the terminal.
``--json`` output keeps every character intact."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from engram import settings
from engram.errors import ProjectResolutionError

if TYPE_CHECKING:
    from engram.project import ProjectResolution
    from engram.store import Store


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print machine-readable JSON on stdout",
    )


def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def open_store() -> Store:
    from engram.store import Store

    return Store.open()


def dumps(data: Any) -> str:
    import orjson

    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def emit(args: argparse.Namespace, human: str | None, data: Any) -> None:
    """Print ``data`` as JSON with ``--json``, else the human text (if any)."""
    if wants_json(args):
        sys.stdout.write(dumps(data) + "\n")
    elif human is not None:
        from engram.terminal import for_terminal  # not at import: `engram mcp` never prints

        human = for_terminal(human)
        sys.stdout.write(human if human.endswith("\n") else human + "\n")


def say(line: str) -> None:
    """A human progress line on stdout, printed at once (never with ``--json``)."""
    from engram.terminal import for_terminal

    print(for_terminal(line), flush=True)


def warn(line: str, *, kind: str = "warning") -> None:
    """``engram: <kind>: <line>`` on stderr (``kind`` error, warning, notice)."""
    from engram.terminal import for_terminal

    sys.stderr.write(f"engram: {kind}: {for_terminal(line)}\n")


def resolve_project(explicit: str | None) -> ProjectResolution:
    """``--project`` → ``ENGRAM_PROJECT`` → the working directory (ambiguous ⇒ error)."""
    import os

    from engram.project import ProjectResolution, detect_project, normalize_project

    if explicit and explicit.strip():
        name = normalize_project(explicit)[0]
        return ProjectResolution(name, "explicit_override", "", os.getcwd())
    override = settings.raw("ENGRAM_PROJECT")
    if override:
        name = normalize_project(override)[0]
        return ProjectResolution(name, "process_override", "", os.getcwd())
    resolution = detect_project()
    if resolution.ambiguous:
        raise ProjectResolutionError(
            "cannot tell which project this directory belongs to; pass --project "
            f"(one of: {', '.join(resolution.available_projects)})",
            code="ambiguous_project",
            available_projects=resolution.available_projects,
        )
    return resolution


def read_text_argument(value: str) -> str:
    """``-`` reads the value from standard input (for long memory contents)."""
    return sys.stdin.read() if value == "-" else value

"""Argument checks every store method shares — memory ids, counts, project names — so the CLI,
the MCP tools and the HTTP API report the same mistake in the same words (they only render the
error). Faces that read input leniently (the Go tool's rules: engram/mcp/lenient.py,
engram/http/lenient.py) turn what they forgive into a default *before* calling the store; what
reaches these checks is refused with a message naming the argument and the value."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engram.errors import NotFoundError, ProjectResolutionError, ValidationError
from engram.store.db import MAX_INTEGER
from engram.text import find_similar


class UnknownProjectError(ProjectResolutionError, NotFoundError):
    """An explicit project name nothing is stored under (``unknown_project``, HTTP 404): a
    project-resolution failure for the faces that list ``available_projects``, and a
    not-found for everything that handles those."""

    status_code = 404

    def __init__(self, message: str, *, available_projects: list[str]) -> None:
        super().__init__(message, code="unknown_project", available_projects=available_projects)


def shown(value: Any) -> str:
    """A refused value as the message quotes it (cut: a message is one line)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_id(value: Any, field: str = "id") -> int:
    """A local integer id: a whole number from 1 to SQLite's largest integer. Text holding one
    (``"12"``, from a command line) is read as that number."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValidationError(f"{field} must be an integer (got {shown(value)})", field=field)
    try:
        number = int(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(
            f"{field} must be an integer (got {shown(value)})", field=field
        ) from None
    if number < 1:
        raise ValidationError(f"{field} must be a positive integer (got {number})", field=field)
    if number > MAX_INTEGER:  # SQLite would raise OverflowError binding it
        raise ValidationError(f"{field} is out of range (at most {MAX_INTEGER})", field=field)
    return number


def check_count(
    value: Any, field: str, *, default: int, maximum: int | None = None, minimum: int = 1
) -> int:
    """How many of something a caller asks for: ``None`` is ``default``; a whole number below
    ``minimum`` is refused (``--limit -3`` is a mistake, not "the default"); above ``maximum``
    it is read as the maximum."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValidationError(f"{field} must be a whole number (got {shown(value)})", field=field)
    try:
        number = int(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(
            f"{field} must be a whole number (got {shown(value)})", field=field
        ) from None
    if number < minimum:
        raise ValidationError(f"{field} must be at least {minimum} (got {number})", field=field)
    return number if maximum is None else min(number, maximum)


def unknown_project(name: str, known: Iterable[str], *, hint: str = "") -> UnknownProjectError:
    """The error for a project nothing is stored under, with a did-you-mean when a known name
    is close (``acmee`` → ``acme``) and ``hint`` (what the face suggests instead) after it."""
    choices = sorted(set(known))
    similar = find_similar(name, choices, max_distance=2) or _same_start(name, choices)
    message = f'Unknown project "{name}": nothing is stored under that name.'
    if similar:
        message += f' Did you mean "{similar[0]}"?'
    if hint:
        message += f" {hint}"
    elif choices:
        message += f" Projects: {', '.join(choices)}."
    return UnknownProjectError(message, available_projects=choices)


def _same_start(name: str, choices: list[str]) -> list[str]:
    """Names that begin like ``name`` (``acmee`` → ``acme-web``): a typo at the end of a
    short name is too far from a longer one by spelling alone. The longest shared start wins."""
    target = name.lower()

    def shared(other: str) -> int:
        count = 0
        for a, b in zip(target, other.lower(), strict=False):
            if a != b:
                break
            count += 1
        return count

    need = max(3, len(target) - 2)
    ranked = sorted((-shared(c), c) for c in choices if shared(c) >= need)
    return [c for _, c in ranked]

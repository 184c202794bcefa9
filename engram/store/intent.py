"""Checking the user's intent about a memory before it is written: an importance override, a
pin, and the window in which the memory was true (docs/importance.md)."""

from __future__ import annotations

from typing import Any

from engram.errors import ValidationError
from engram.importance import AUTO, importance_argument
from engram.times import parse_user_date

_CLEAR = frozenset({"", "none", "null", "clear"})


def check_intent(
    importance: float | str | None,
    pinned: bool | None,
    valid_from: str | None,
    valid_to: str | None,
) -> dict[str, Any]:
    """The intent fields to change (only those given), checked; raises
    :class:`ValidationError` naming the field."""
    changes: dict[str, Any] = {}
    if importance is not None:
        override = importance_argument(importance)
        changes["importance_override"] = None if override == AUTO else override
    if pinned is not None:
        if not isinstance(pinned, bool):
            raise ValidationError(f"pinned must be true or false, got {pinned!r}", field="pinned")
        changes["pinned"] = pinned
    for name, when in (("valid_from", valid_from), ("valid_to", valid_to)):
        if when is not None:
            changes[name] = validity_date(when, name)
    return changes


def validity_date(value: str, field: str) -> str | None:
    """A ``valid_from``/``valid_to`` as store text; ``""`` or ``none`` clears it."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a date or 'none', got {value!r}", field=field)
    if value.strip().lower() in _CLEAR:
        return None
    return parse_user_date(value, field=field)


def check_window(valid_from: str | None, valid_to: str | None) -> None:
    """A memory cannot stop being true before it starts."""
    if valid_from and valid_to and valid_to < valid_from:
        raise ValidationError(
            f"valid_to ({valid_to}) is before valid_from ({valid_from})", field="valid_to"
        )

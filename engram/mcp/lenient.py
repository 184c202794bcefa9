"""Tool arguments read the way the Go tool reads them, where it is lenient (pure).

Agents set up for the Go tool send what it accepts: JSON numbers arrive as floats there and are
truncated (``"id": 12.7`` is memory 12), and a count or flag of the wrong type falls back to
its default (``"limit": "many"``, ``"hard_delete": "maybe"``). So do these. A memory id of the
wrong type (a string, a boolean) is still refused, as the Go tool refuses it ("id is
required"); docs/mcp.md lists which argument is read how.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BeforeValidator


def _truncate(value: Any) -> Any:
    """A finite float becomes the integer the Go tool would use; anything else is left for
    the strict check that follows."""
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return value


#: For ids: ``12.0`` and ``12.7`` are 12; a string or boolean is still refused.
Truncated = BeforeValidator(_truncate)


def count_or_default(default: int | None, maximum: int | None = None) -> BeforeValidator:
    """A count: a number (truncated) of at least 1, at most ``maximum``; anything else —
    a string, a boolean, null, zero or less — is ``default``."""

    def read(value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return default
        if isinstance(value, float) and not math.isfinite(value):
            return default
        number = int(value)
        if number < 1:
            return default
        return min(number, maximum) if maximum is not None else number

    return BeforeValidator(read)


def flag_or_default(default: bool) -> BeforeValidator:
    """A flag: ``true``/``false``; anything else is ``default``."""

    def read(value: Any) -> bool:
        return value if isinstance(value, bool) else default

    return BeforeValidator(read)

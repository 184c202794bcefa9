"""Query parameters read the way the Go tool reads them, where it is lenient (pure).

Hooks and scripts written for the Go tool send ``?limit=oops`` or ``?hard=maybe`` and get an
answer there, not an error: a ``limit`` (and the timeline's ``before``/``after``) that is not a
whole number, or is below 1, means the default (Go: ``strconv.Atoi``, then ``if n <= 0``);
``hard`` is true for ``1``, ``t``, ``T``, ``TRUE``, ``true`` or ``True`` and false for anything
else (Go: ``strconv.ParseBool``, an error meaning false). A number above a route's maximum is
read as the maximum. Everything else stays strict (docs/http.md lists which is which).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from litestar.params import QueryParameter

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
#: What ``strconv.Atoi`` accepts (digits capped: a longer run is no count anyone means).
_WHOLE = re.compile(r"[+-]?[0-9]{1,30}")


def whole_number(raw: str | None, default: int, maximum: int) -> int:
    """``raw`` as the Go tool reads a count: the default when it is missing, not a whole
    number (``strconv.Atoi``: optional sign, ASCII digits, nothing around them) or below 1;
    at most ``maximum``."""
    if raw is None or not _WHOLE.fullmatch(raw):
        return default
    value = int(raw)
    return default if value < 1 else min(value, maximum)


def go_bool(raw: str | None) -> bool:
    """``raw`` as ``strconv.ParseBool`` reads it, an error meaning false."""
    return raw in GO_TRUE


def count_parameter(default: int, maximum: int, what: str = "how many") -> Any:
    """The OpenAPI description of a count read with :func:`whole_number` (the handler converts
    it): ``Annotated[str | None, count_parameter(…)]``."""
    return QueryParameter(
        description=f"{what} (default {default}, at most {maximum}); not a whole number or "
        "below 1: the default, as the Go tool reads it",
    )


LenientFlag = Annotated[
    str | None,
    QueryParameter(
        description="true for 1, t, T, TRUE, true or True; anything else is false (as the Go "
        "tool reads it)"
    ),
]

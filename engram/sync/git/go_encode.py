"""JSON as the Go tool's ``encoding/json`` writes it, for the files we write for that tool (its
manifest, its chunks, its export): compact or two-space indented, keys in the order given (Go
writes struct fields in declaration order), non-ASCII kept as UTF-8, and ``<``, ``>``, ``&``,
U+2028 and U+2029 escaped as ``\\u003c``… the way Go's HTML-safe encoder does (pure).

Python's ``json`` module already matches Go on everything else that matters here: ``": "`` and
``","`` separators when indenting, ``\\b``/``\\f``/``\\n``/``\\r``/``\\t`` short escapes, other
control characters as ``\\u00XX``, integers as digits.
"""

from __future__ import annotations

import json
from typing import Any

_HTML_SAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Go writes U+FFFD for invalid text
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def go_compact(value: Any) -> bytes:
    """``json.Marshal(value)``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _utf8(text.translate(_HTML_SAFE))


def go_indented(value: Any) -> bytes:
    """``json.MarshalIndent(value, "", "  ")`` (no trailing newline, as Go writes files)."""
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return _utf8(text.translate(_HTML_SAFE))

"""Reading JSON with comments (JSONC) and changing one member of it in place.

VS Code's ``mcp.json``, OpenCode's ``opencode.jsonc`` and many editors' settings are JSONC: ``//``
and ``/* */`` comments and trailing commas. ``engram setup`` must add its entry to such a file
without dropping the user's comments, so an edit here replaces or inserts the text of one member
and leaves every other byte of the file as it was.

Parsing works on a *blanked* copy of the text (comments and trailing commas replaced by spaces,
so every offset stays the same) that is plain JSON: orjson reads the values, and a small scanner
records where each object member's value starts and ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


class JsoncError(ValueError):
    """Text that is not JSON even after comments and trailing commas are set aside."""


def blank(text: str) -> str:
    """``text`` with comments and trailing commas replaced by spaces (newlines kept), which is
    plain JSON when ``text`` was JSONC — at the same offsets."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # a comma not yet followed by a value
    while i < n:
        ch = text[i]
        if ch == '"':
            i = _string_end(text, i)
            last_comma = None
            continue
        if ch == "/" and i + 1 < n and text[i + 1] in "/*":
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i + 2)
            if end < 0:
                if text[i + 1] == "*":
                    raise JsoncError("unterminated /* comment")
                end = n
            elif text[i + 1] == "*":
                end += 2
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]" and last_comma is not None:
            out[last_comma] = " "
            last_comma = None
        elif not ch.isspace():
            last_comma = None
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """The offset just after the JSON string that starts at ``start``."""
    i, n = start + 1, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    raise JsoncError("unterminated string")


def loads(text: str) -> Any:
    """The value of a JSONC document."""
    try:
        return orjson.loads(blank(text))
    except orjson.JSONDecodeError as exc:
        raise JsoncError(str(exc)) from None


# --- where members are --------------------------------------------------------------------


@dataclass(slots=True)
class Span:
    """Where a value is in the text, and for an object, where its members' values are."""

    start: int
    end: int
    members: dict[str, Span] = field(default_factory=dict)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def _skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def value(self) -> Span:
        self._skip()
        start = self.i
        ch = self.text[start]
        if ch == "{":
            span = Span(start, start)
            self.i += 1
            self._skip()
            while self.text[self.i] != "}":
                key_end = _string_end(self.text, self.i)
                key = orjson.loads(self.text[self.i : key_end])
                self.i = key_end
                self._skip()
                self.i += 1  # the colon
                span.members[key] = self.value()
                self._skip()
                if self.text[self.i] == ",":
                    self.i += 1
                    self._skip()
            self.i += 1
            span.end = self.i
            return span
        if ch == "[":
            self.i += 1
            self._skip()
            while self.text[self.i] != "]":
                self.value()
                self._skip()
                if self.text[self.i] == ",":
                    self.i += 1
                    self._skip()
            self.i += 1
            return Span(start, self.i)
        if ch == '"':
            self.i = _string_end(self.text, start)
            return Span(start, self.i)
        while self.i < len(self.text) and self.text[self.i] not in ",]} \t\r\n":
            self.i += 1
        return Span(start, self.i)


def spans(text: str) -> Span:
    """Where the document's values are (the text must be valid JSONC: check with :func:`loads`)."""
    return _Scanner(blank(text)).value()


# --- changing one member -------------------------------------------------------------------


def _indent_unit(text: str) -> str:
    for line in text.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)]
    return "  "


def _line_indent(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    line = text[line_start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _render(value: Any, indent: str, unit: str) -> str:
    """``value`` as JSON laid out with ``unit`` per level, its later lines at ``indent``."""
    # split on "\n" only: str.splitlines() also breaks at U+0085 and friends inside strings
    lines = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().split("\n")
    out = []
    for number, line in enumerate(lines):
        depth = (len(line) - len(line.lstrip(" "))) // 2
        body = unit * depth + line.lstrip(" ")
        out.append(body if number == 0 else indent + body)
    return "\n".join(out)


def set_member(text: str, path: tuple[str, ...], value: Any) -> str:
    """``text`` with the member at ``path`` (keys from the top-level object) set to ``value``.

    Missing objects on the way are created. Only the changed member's text is rewritten; every
    comment, trailing comma and blank line elsewhere stays byte for byte.
    """
    if not path:
        raise ValueError("path must name at least one member")
    data = loads(text)
    if not isinstance(data, dict):
        raise JsoncError("the top level is not an object")
    unit = _indent_unit(text)
    node = spans(text)
    for depth, key in enumerate(path):
        member = node.members.get(key)
        last = depth == len(path) - 1
        if member is None:
            nested: Any = value
            for outer in reversed(path[depth + 1 :]):
                nested = {outer: nested}
            return _insert(text, node, key, nested, unit)
        if last:
            indent = _line_indent(text, member.start)
            return text[: member.start] + _render(value, indent, unit) + text[member.end :]
        if text[member.start] != "{":
            raise JsoncError(f'"{key}" is not an object')
        node = member
    raise AssertionError("unreachable: the path's last key returns")  # for the type checker


def _insert(text: str, parent: Span, key: str, value: Any, unit: str) -> str:
    """Add ``"key": value`` as the first member of the object at ``parent`` (first, so no comma
    or trailing-comma rule of the existing members is touched)."""
    outer = _line_indent(text, parent.start)
    inner = outer + unit
    rendered = f"{orjson.dumps(key).decode()}: {_render(value, inner, unit)}"
    opening = parent.start + 1
    closing = parent.end - 1
    if parent.members:
        return f"{text[:opening]}\n{inner}{rendered},{text[opening:]}"
    if not text[opening:closing].strip():
        return f"{text[:opening]}\n{inner}{rendered}\n{outer}{text[closing:]}"
    # An empty object holding only comments: keep them after the new member.
    return f"{text[:opening]}\n{inner}{rendered}{text[opening:]}"

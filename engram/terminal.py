"""What may reach a terminal: text from memories, chunk headers, servers and other machines is
data, never terminal commands.

A memory can hold any character, and a terminal obeys the ones that are commands: ``ESC ]52``
writes the user's clipboard, ``ESC [2J`` clears the screen, ``CR`` overwrites what a line said,
C1 codes (``\\x9b`` is a one-byte CSI) do the same on terminals that honour them. Every human
face (CLI output and errors, the TUI) shows such characters as visible escapes (``\\x1b``)
through :func:`for_terminal`; the store, ``--json`` output, MCP results and HTTP answers keep
them intact, since there they are data a program reads, not bytes a terminal runs.
"""

from __future__ import annotations

import re

#: C0 controls except TAB and LF, DEL, and the C1 controls (U+0080..U+009F).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x09), *range(0x0B, 0x20))}
_ESCAPES.update({code: f"\\x{code:02x}" for code in range(0x7F, 0xA0)})


def for_terminal(text: str) -> str:
    """``text`` with every control character but newline and tab shown as a visible escape
    (``ESC`` → ``\\x1b``), so printing it cannot move the cursor, restyle, retitle, clear the
    screen or write the clipboard. A Windows line end (CRLF) reads as a plain newline."""
    if not _CONTROL.search(text):
        return text  # the usual case costs one scan
    return text.replace("\r\n", "\n").translate(_ESCAPES)

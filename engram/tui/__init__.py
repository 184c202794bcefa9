"""``engram tui``: the terminal UI (Textual) over the local store."""

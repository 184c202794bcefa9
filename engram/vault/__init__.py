"""The Markdown vault: memories as notes a person can read and edit (Obsidian or any editor),
synced both ways with the store. ``note`` owns the file format, ``state`` the vault's record of
its last sync, ``sync`` the export and two-way sync services."""

from engram.vault.sync import Conflict, NoteEvent, VaultReport, VaultSync

__all__ = ["Conflict", "NoteEvent", "VaultReport", "VaultSync"]

"""Memories from what the team already wrote down: ``git`` reads commits into memories,
``summarize`` extracts learnings from recent memories and commits (an LLM provider or an
offline extractive fallback), ``provider`` talks to the LLM."""

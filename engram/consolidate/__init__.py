"""Consolidation: finding near-duplicate memories and merging them (pure functions; the store
applies the plan in :mod:`engram.store.consolidation`). See docs/importance.md."""

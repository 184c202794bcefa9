"""The entity graph of memories (issue 20): extracting entities and typed relationships from a
memory's text — pure code (no store, no network): the local store (``engram graph ingest``) and
the cloud dashboard derive the same graph from the same memories with it — and the shapes of
what the local graph answers (:mod:`engram.graph.answers`)."""

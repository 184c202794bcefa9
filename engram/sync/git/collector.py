"""The cyclic garbage collector during an import: paused, and run on the young objects once
per chunk instead.

An import allocates millions of objects that reference counting frees (a chunk's parsed
records, the rows built from them) and almost no reference cycles (535 objects in cycles in
an import of 100,000 mutations). Python's collector still ran 1,268 times over those objects,
nine of them full collections over everything alive: 3.4% of the import's CPU
(docs/performance.md, "The import (seventh round)"). Paused, the few cycles would pile up for
the whole import: a young-generation collection after every chunk (its records gone by then)
finds them while they are young, for a fraction of the cost. Full collections resume with the
collector when the import ends.
"""

from __future__ import annotations

import gc
from types import TracebackType


class ChunkCollections:
    """A context in which the collector is paused (if it was running) and :meth:`chunk_done`
    collects the young generations; the collector's state is restored on the way out."""

    def __init__(self) -> None:
        self._paused = False

    def __enter__(self) -> ChunkCollections:
        self._paused = gc.isenabled()
        if self._paused:
            gc.disable()
        return self

    def chunk_done(self) -> None:
        """A chunk has been applied (its records freed): collect the cycles made since."""
        if self._paused:
            gc.collect(1)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._paused:
            self._paused = False
            gc.enable()

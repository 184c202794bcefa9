"""What both sync transports share about long work: the progress-bar seam (the CLI passes a
real bar, everything else the silent default) and the name a sync says its records came from."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

#: ``progress(label, total)`` → a context manager yielding ``advance(n)``.
ProgressFactory = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


@contextlib.contextmanager
def no_progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


def default_author() -> str:
    """Who a chunk or push says created it: ``$USER``, ``$USERNAME``, the host name, or
    ``unknown``."""
    for name in ("USER", "USERNAME"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"

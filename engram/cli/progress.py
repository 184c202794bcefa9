"""Progress bars for long CLI work (sync exports and imports, and any command that reuses it).

A bar appears only on an interactive terminal (stderr is a TTY), only for work of at least
``min_total`` units, and never with ``--quiet`` or ``--json``: scripts and pipes get clean
output. ``rich`` is imported only when a bar is actually shown, so quick commands stay quick.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

#: Below this many units the work is quick enough that a bar would only flicker.
DEFAULT_MIN_TOTAL = 1000


def _noop(_: int) -> None:
    return None


def wants_bar(total: int, *, quiet: bool = False, min_total: int = DEFAULT_MIN_TOTAL) -> bool:
    return not quiet and total >= min_total and sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(
    label: str,
    total: int,
    *,
    quiet: bool = False,
    min_total: int = DEFAULT_MIN_TOTAL,
) -> Iterator[Callable[[int], None]]:
    """A bar on stderr for ``total`` units of work; yields ``advance(n)``.

    Quiet (yields a no-op) when ``quiet``, when stderr is not a terminal, or when ``total`` is
    below ``min_total``.
    """
    if not wants_bar(total, quiet=quiet, min_total=min_total):
        yield _noop
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    from rich.markup import escape

    from engram.terminal import for_terminal

    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        # Labels can name a project: shown as text, never as markup or terminal commands.
        task = bar.add_task(escape(for_terminal(label)), total=total)
        yield lambda n: bar.advance(task, n)


def factory(*, quiet: bool = False, min_total: int = DEFAULT_MIN_TOTAL):
    """A ``progress(label, total)`` callable with these settings, for services that take one.
    When no bar can show (quiet, or stderr is not a terminal) it is the services' silent
    default, so they skip what only a bar needs (an export or a push counting what it will
    send: a scan of the journal)."""
    if quiet or not sys.stderr.isatty():
        from engram.sync.progress import no_progress

        return no_progress

    def make(label: str, total: int) -> contextlib.AbstractContextManager[Callable[[int], None]]:
        return progress_bar(label, total, quiet=quiet, min_total=min_total)

    return make

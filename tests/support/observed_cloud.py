"""Run ``engram cloud serve`` with its long-poll notifier observed, for end-to-end tests that must
know *when* a pull is waiting without sleeping and hoping.

``python -m tests.support.observed_cloud EVENTS ARGS…`` patches :class:`Notifier` of the real
program, then runs ``engram ARGS…``. Each event is one line appended to the file ``EVENTS``:

* ``waiting AFTER``: a pull found nothing newer than ``AFTER`` and waits for an announcement;
* ``latest SEQ``: the process's listener heard that seqs up to ``SEQ`` were committed (by any
  server process sharing the database).

The product carries no test hook; only a single-process server (no ``--workers``) can be
observed, since uvicorn's worker processes import the app afresh.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def command(events: Path, *args: str) -> list[str]:
    """The argv that runs ``engram ARGS`` with its notifier's events appended to ``events``."""
    return [sys.executable, "-m", "tests.support.observed_cloud", str(events), *args]


def _patch(events: Path) -> None:
    from engram_cloud.notify import Notifier

    def note(line: str) -> None:
        with events.open("a") as out:
            out.write(line + "\n")

    real_wait = Notifier.wait
    real_wake = Notifier._wake

    async def wait(self: Notifier, after: int, timeout: float) -> None:
        note(f"waiting {after}")
        await real_wait(self, after, timeout)

    def wake(self: Notifier) -> None:
        note(f"latest {self.latest}")
        real_wake(self)

    Notifier.wait = wait  # type: ignore[method-assign]
    Notifier._wake = wake  # type: ignore[method-assign]


def main(argv: Sequence[str]) -> int:
    events, *args = argv
    _patch(Path(events))
    from engram.cli.main import main as engram_main

    return engram_main(args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Timing fresh processes, as a user's shell starts them: shared by the benches that measure a
cold ``engram`` command (``store_bench.py``, ``semantic_bench.py``)."""

from __future__ import annotations

import compileall
import resource
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def compile_engram() -> None:
    """Engram's bytecode, as an installed package has it: a checkout run with
    ``PYTHONDONTWRITEBYTECODE`` (as many containers set) would compile every module at every
    start and measure that instead."""
    compileall.compile_dir(str(REPO / "engram"), quiet=1)


def timed_process(args: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall time and least CPU time (user + system) of ``runs`` runs of a process: on a
    machine shared with other work the wall clock mostly measures the queue for a core."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(args, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(cpus)

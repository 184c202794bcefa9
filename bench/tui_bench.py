"""Benchmark of ``engram tui`` on a large store (default 100,000 memories).

Measures, in one run and against baselines measured the same way in the same run:

1. **Start-up**: from process start to the first screen drawn, for ``engram tui`` and for an empty
   Textual app started the same way. Each program runs in its own pseudo-terminal (120×40, like a
   real terminal: Textual draws exactly as it would for a user); the clock stops when the text
   that proves the screen is drawn appears in what the program wrote to the terminal — for
   Engram the dashboard's observation count ("100,000"), i.e. data loaded *and* painted, not just
   the frame; for the empty app its one line of text. Target: Engram within 0.5 s of the empty
   app.
2. **Live search**: from the last keystroke in the search box to the result list on screen, with
   the app running headless on the same store. The clock starts just before the last key is
   sent and stops at the first frame Textual composes that holds the results of the full query.
   Baselines: the same query straight through ``Store.search`` (what the database costs) and a
   bare Textual app with one Input (what showing any keystroke costs on this machine now).
   Typed as a burst and at ~12 keys/s (where earlier keystrokes' searches may still be running
   when the last key arrives). Target: ≤ 100 ms.
3. **Scrolling**: opening the recent list (count + first page) and jumping to its end (only the
   last page is read), headless.

The store is built once through the store's own import (realistic Zipf-distributed words) and
kept in ``bench/results/`` (gitignored); ``--rebuild`` makes it again.

    python bench/tui_bench.py [--n 100000] [--runs 5] [--rebuild] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import random
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402

RESULTS = REPO / "bench" / "results"
COLS, ROWS = 120, 40
STORE_VERSION = 1
QUERIES = [
    "login timeout",
    "how did we fix the flaky cache test",
    "postgres migration lock",
    "retry backoff worker queue",
]
EMPTY_APP = """
from textual.app import App
from textual.widgets import Static

class Empty(App):
    def compose(self):
        yield Static("empty-app-drawn")

Empty().run()
"""
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


# --- the store ----------------------------------------------------------------------------------


def vocabulary(rng: random.Random) -> list[str]:
    tech = (
        "auth login logout session cookie token csrf oauth sso timeout retry backoff jitter "
        "cache redis memcached invalidation warmup postgres mysql sqlite migration schema index "
        "query planner vacuum lock deadlock transaction isolation replica failover queue worker "
        "celery kafka consumer producer offset partition deploy rollback canary docker image "
        "kubernetes helm ingress nginx proxy tls certificate dns latency throughput profile "
        "flamegraph memory leak goroutine thread async await event loop parser lexer grammar "
        "unicode encoding test flaky fixture mock snapshot coverage lint format build webpack "
        "vite bundle api endpoint route handler middleware validation pagination search fts "
        "ranking bm25 embedding vector config env secret vault rotate audit log metric alert"
    ).split()
    syllables = ["ka", "lo", "mi", "ne", "ru", "so", "ta", "vi", "zo", "pe", "dra", "gli", "xe"]
    made = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(6000)}
    words = tech + sorted(made)
    rng.shuffle(words)
    return words


def build_store(n: int, data_dir: Path) -> None:
    """``n`` memories in 20 projects, one session per 40 memories (every tenth still open)."""
    rng = random.Random(20261121)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) ** 1.07 for rank in range(len(words))]  # Zipf, like prose

    def text(count: int) -> str:
        return " ".join(rng.choices(words, weights, k=count))

    projects = [f"project-{i:02d}" for i in range(20)]
    session_count = max(1, n // 40)
    sessions = [
        {
            "id": f"session-{s:05d}",
            "project": projects[s % len(projects)],
            "directory": f"/src/{projects[s % len(projects)]}",
            "started_at": "2026-01-01 00:00:00",
            "ended_at": None if s % 10 == 0 else "2026-01-01 08:00:00",
        }
        for s in range(session_count)
    ]
    start = 1_767_225_600  # 2026-01-01
    kinds = ["bugfix", "decision", "architecture", "discovery", "pattern", "config", "learning"]
    observations = []
    for i in range(n):
        session = sessions[i % session_count]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start + i * 20))
        observations.append(
            {
                "sync_id": f"obs-bench{i:011d}",
                "session_id": session["id"],
                "type": kinds[i % len(kinds)],
                "title": text(rng.randint(4, 8)).capitalize(),
                "content": (
                    f"**What**: {text(14)}\n**Why**: {text(10)}\n"
                    f"**Where**: src/{rng.choice(words)}/{rng.choice(words)}.py\n"
                    f"**Learned**: {text(10)}"
                ),
                "project": session["project"],
                "scope": "project",
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
    prompts = [
        {
            "sync_id": f"prompt-bench{i:010d}",
            "session_id": sessions[i % session_count]["id"],
            "content": text(12),
            "project": sessions[i % session_count]["project"],
            "created_at": "2026-01-01 00:00:00",
        }
        for i in range(n // 10)
    ]
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.import_data(
            {
                "version": "0.1.0",
                "sessions": sessions,
                "observations": observations,
                "prompts": prompts,
            }
        )


def prepared_store(n: int, rebuild: bool) -> Path:
    data_dir = RESULTS / f"tui-store-v{STORE_VERSION}-{n}"
    done = data_dir / "complete"
    if rebuild or not done.exists():
        if data_dir.exists():
            for path in data_dir.iterdir():
                path.unlink()
        data_dir.mkdir(parents=True, exist_ok=True)
        print(f"building a store of {n:,} memories (once; kept in {data_dir}) …", flush=True)
        began = time.perf_counter()
        build_store(n, data_dir)
        done.write_text("ok\n")
        print(f"  built in {time.perf_counter() - began:.1f} s", flush=True)
    return data_dir


# --- start-up in a pseudo-terminal --------------------------------------------------------------


def time_to_text(command: list[str], env: dict[str, str], marker: str, timeout: float = 60.0):
    """Seconds from starting ``command`` in a fresh pty until ``marker`` is on its screen."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    began = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=REPO,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    written = b""
    elapsed = None
    try:
        while time.perf_counter() - began < timeout:
            ready, _, _ = select.select([master], [], [], 0.01)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            written += chunk
            if marker in _ANSI.sub("", written.decode("utf-8", errors="ignore")):
                elapsed = time.perf_counter() - began
                break
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(master)
    if elapsed is None:
        tail = _ANSI.sub("", written.decode("utf-8", errors="ignore"))[-800:]
        raise RuntimeError(f"{marker!r} never appeared for {command}; last output:\n{tail}")
    return elapsed


def startup(data_dir: Path, n: int, runs: int) -> dict[str, object]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "ENGRAM_DATA_DIR": str(data_dir),
    }
    engram = [sys.executable, "-m", "engram", "tui"]
    empty = [sys.executable, "-c", EMPTY_APP]
    marker = f"{n:,}"
    time_to_text(empty, env, "empty-app-drawn")  # warm the OS file cache for both
    time_to_text(engram, env, marker)
    engram_times, empty_times = [], []
    for _ in range(runs):  # interleaved, so drift on a shared machine hits both alike
        empty_times.append(time_to_text(empty, env, "empty-app-drawn"))
        engram_times.append(time_to_text(engram, env, marker))
    engram_s, empty_s = statistics.median(engram_times), statistics.median(empty_times)
    return {
        "engram_tui_s": round(engram_s, 3),
        "empty_textual_app_s": round(empty_s, 3),
        "difference_s": round(engram_s - empty_s, 3),
        "target_difference_s": 0.5,
        "runs": runs,
        "engram_runs_s": [round(t, 3) for t in engram_times],
        "empty_runs_s": [round(t, 3) for t in empty_times],
    }


# --- live search and scrolling, headless ----------------------------------------------------------


class Frames:
    """Watches the frames the app composes: ``App._display`` receives each finished frame (in
    headless mode it is then discarded instead of written to a terminal). Observing it — and
    sending keys straight to the driver instead of through ``Pilot.press``, which sleeps until
    the process is idle after every key — keeps Pilot's own waiting out of the figures."""

    def __init__(self, app) -> None:
        self.app = app
        self.condition = None
        self.seen_at: float | None = None
        original = app._display

        def display(screen, renderable) -> None:
            original(screen, renderable)
            if self.seen_at is None and self.condition is not None and self.condition():
                self.seen_at = time.perf_counter()

        app._display = display

    def key(self, key: str) -> None:
        from textual import events

        name = {" ": "space"}.get(key, key)
        character = key if len(key) == 1 else None
        event = events.Key(name, character)
        event.set_sender(self.app)
        self.app._driver.send_message(event)

    async def until_drawn(self, condition, began: float, timeout: float = 30.0) -> float:
        """Milliseconds from ``began`` to the first frame composed while ``condition()``."""
        self.seen_at = None
        self.condition = condition
        deadline = time.perf_counter() + timeout
        while self.seen_at is None:
            if time.perf_counter() > deadline:
                raise RuntimeError("the TUI never drew what was expected")
            await asyncio.sleep(0.001)
        self.condition = None
        return (self.seen_at - began) * 1000


async def echo_baseline(runs: int) -> float:
    """Median ms from a key to the frame showing it, in a Textual app holding only an Input:
    what any Textual app costs per keystroke on this machine right now."""
    from textual.app import App, ComposeResult
    from textual.widgets import Input

    class Echo(App[None]):
        def compose(self) -> ComposeResult:
            yield Input()

    app = Echo()
    times = []
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        frames = Frames(app)
        box = app.query_one(Input)
        await pilot.pause()
        for i in range(runs * 4):
            char = "abcdefghij"[i % 10]
            await asyncio.sleep(1 / 12)
            began = time.perf_counter()
            frames.key(char)
            times.append(await frames.until_drawn(lambda c=char: box.value.endswith(c), began))
    return statistics.median(times)


async def headless(data_dir: Path, n: int, runs: int) -> dict[str, object]:
    from engram.tui.app import EngramApp
    from engram.tui.gateway import SEARCH_PAGE, Gateway
    from engram.tui.lazylist import LazyList
    from engram.tui.lists import RecentScreen, SearchScreen

    app = EngramApp(Gateway(Config(data_dir=data_dir)))
    out: dict[str, object] = {}
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        frames = Frames(app)
        await frames.until_drawn(
            lambda: app.screen.query_one("#recent", LazyList).item_at(0) is not None,
            time.perf_counter(),
        )

        # scrolling: open the recent list (count + first page), jump to its end
        def recent() -> LazyList | None:
            screen = app.screen
            return screen.query_one(LazyList) if isinstance(screen, RecentScreen) else None

        began = time.perf_counter()
        frames.key("o")
        out["recent_list_open_ms"] = round(
            await frames.until_drawn(
                lambda: (r := recent()) is not None and r.total == n and r.item_at(0) is not None,
                began,
            ),
            1,
        )
        began = time.perf_counter()
        frames.key("end")
        out["jump_to_end_ms"] = round(
            await frames.until_drawn(lambda: recent().item_at(n - 1) is not None, began), 1
        )
        out["pages_read_for_the_jump"] = sorted(recent()._pages)
        began = time.perf_counter()
        for _ in range(20):
            frames.key("pageup")
        target = n - 1 - 20 * ((ROWS - 8) // 2)
        out["twenty_page_ups_ms"] = round(
            await frames.until_drawn(
                lambda: (
                    recent().cursor <= target
                    and recent().item_at(recent().visible_range()[0] - 1) is not None
                ),
                began,
            ),
            1,
        )
        await pilot.press("escape")

        # live search
        with Store.open(config=Config(data_dir=data_dir)) as raw:
            baseline = {}
            for query in QUERIES:
                times = []
                for _ in range(runs):
                    began = time.perf_counter()
                    raw.search(query, limit=SEARCH_PAGE)
                    times.append(time.perf_counter() - began)
                baseline[query] = statistics.median(times) * 1000
        await pilot.press("s")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        results = screen.query_one("#results", LazyList)
        latencies: dict[str, dict[str, float]] = {}
        for pace, gap in (("burst", 0.0), ("12 keys/s", 1 / 12)):
            for query in QUERIES:
                times = []
                for _ in range(runs):
                    frames.key("ctrl+u")  # clear the box (Input: delete to the start)
                    await frames.until_drawn(lambda: screen.shown_query == "", time.perf_counter())
                    for char in query[:-1]:
                        frames.key(char)
                        await asyncio.sleep(gap)
                    began = time.perf_counter()
                    frames.key(query[-1])
                    times.append(
                        await frames.until_drawn(
                            lambda q=query: (
                                screen.shown_query == q
                                and results.total is not None
                                and (results.total == 0 or results.item_at(0) is not None)
                            ),
                            began,
                        )
                    )
                latencies.setdefault(pace, {})[query] = statistics.median(times)
        out["search"] = {
            "textual_key_to_frame_ms": round(await echo_baseline(runs), 1),
            "store_search_ms": {q: round(v, 1) for q, v in baseline.items()},
            "last_key_to_results_ms": {
                pace: {q: round(v, 1) for q, v in per.items()} for pace, per in latencies.items()
            },
            "worst_last_key_to_results_ms": round(
                max(v for per in latencies.values() for v in per.values()), 1
            ),
            "target_ms": 100,
        }
        await pilot.press("ctrl+c")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--runs", type=int, default=5, help="repetitions per measurement")
    parser.add_argument("--rebuild", action="store_true", help="build the store again")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.n < 60:
        parser.error("--n must be at least 60")

    data_dir = prepared_store(args.n, args.rebuild)
    # Every measurement runs on a copy-free, read-mostly store; the TUI writes nothing here.
    report: dict[str, object] = {"memories": args.n}
    print("start-up (pseudo-terminal, median) …", flush=True)
    report["startup"] = startup(data_dir, args.n, args.runs)
    print("search and scrolling (headless Pilot) …", flush=True)
    report.update(asyncio.run(headless(data_dir, args.n, args.runs)))

    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return 0
    s = report["startup"]
    search = report["search"]
    print()
    print(f"store: {args.n:,} memories")
    print(
        f"first screen drawn   engram tui {s['engram_tui_s']:.3f} s   "
        f"empty Textual app {s['empty_textual_app_s']:.3f} s   "
        f"difference {s['difference_s']:+.3f} s (target ≤ +0.5 s)"
    )
    print(
        f"recent list          open {report['recent_list_open_ms']:.0f} ms, "
        f"jump to the end {report['jump_to_end_ms']:.0f} ms "
        f"(pages read: {report['pages_read_for_the_jump']}), "
        f"20 × PageUp {report['twenty_page_ups_ms']:.0f} ms"
    )
    print(
        "live search          last keystroke → results on screen (median), vs Store.search; "
        f"a bare Textual Input shows a key in {search['textual_key_to_frame_ms']:.1f} ms"
    )
    for query in QUERIES:
        cells = "   ".join(
            f"{pace} {per[query]:6.1f} ms" for pace, per in search["last_key_to_results_ms"].items()
        )
        print(f"  {query!r:40} {cells}   store {search['store_search_ms'][query]:6.1f} ms")
    worst = search["worst_last_key_to_results_ms"]
    print(f"  worst {worst:.1f} ms (target ≤ 100 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Helpers of the TUI tests: seeding a store, reading what the app draws, waiting for it, and
keeping SVG snapshots of screens under ``test-artifacts/tui/``."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from engram.settings import Config
from engram.store import Store
from engram.tui.app import EngramApp
from engram.tui.gateway import Gateway
from tests.support import REPO

ARTIFACTS = REPO / "test-artifacts" / "tui"

WHAT_WHY = (
    "**What**: Raised the login timeout from 5 s to 30 s and added a Redis-backed retry\n"
    "**Why**: Users on slow VPNs were logged out during the SSO redirect\n"
    "**Where**: src/auth/login.py, config/redis.yml\n"
    "**Learned**: The SSO provider adds up to 20 s of latency under load"
)


@dataclass
class Seeded:
    store: Store
    ids: dict[str, int] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.store.config.data_dir


def seed(store: Store) -> Seeded:
    """Two projects, three sessions (``s-acme-2`` still open), seven memories, two prompts."""
    out = Seeded(store)

    def save(key: str, title: str, content: str, kind: str, project: str, session: str) -> None:
        saved = store.add_observation(
            title=title, content=content, type=kind, project=project, session_id=session
        )
        out.ids[key] = saved.observation.id

    store.create_session("s-acme-1", "acme", "/src/acme")
    store.add_prompt("why does login time out on the VPN?", session_id="s-acme-1", project="acme")
    save("login", "Fixed login timeout", WHAT_WHY, "bugfix", "acme", "s-acme-1")
    save(
        "postgres",
        "Chose PostgreSQL for the cloud server",
        "**What**: PostgreSQL, not MySQL\n**Why**: full-text search and JSONB",
        "decision",
        "acme",
        "s-acme-1",
    )
    save(
        "cookie",
        "Session cookie must be HttpOnly",
        "Set HttpOnly and SameSite=Lax on the session cookie.",
        "pattern",
        "acme",
        "s-acme-1",
    )
    runbook = "\n".join(f"Step {i}: check service number {i} and restart it" for i in range(1, 81))
    save("runbook", "Deploy runbook", runbook, "config", "acme", "s-acme-1")
    store.end_session("s-acme-1", "Auth rework")
    store.create_session("s-acme-2", "acme", "/src/acme")
    store.add_prompt("warm the cache after deploys", session_id="s-acme-2", project="acme")
    save(
        "cache",
        "Cache warmup on deploy",
        "**What**: warm the Redis cache\n**Why**: cold starts",
        "discovery",
        "acme",
        "s-acme-2",
    )
    save(
        "retry",
        "Retry with backoff",
        "Exponential backoff with jitter",
        "pattern",
        "acme",
        "s-acme-2",
    )
    store.create_session("s-zeta-1", "zeta", "/src/zeta")
    save(
        "unicode",
        "Parser handles unicode [bold]markup[/bold]",
        "**What**: ünïcödé input and <script>alert(1)</script> stay text\n"
        "**Learned**: [red]markup[/red] is data, never styling",
        "learning",
        "zeta",
        "s-zeta-1",
    )
    store.end_session("s-zeta-1")
    return out


def seed_many(store: Store, count: int, project: str = "bulk") -> None:
    """``count`` memories in one import (fast), newest with the highest number."""
    sessions = [
        {"id": "s-bulk", "project": project, "directory": "", "started_at": "2026-01-01 00:00:00"}
    ]
    observations = [
        {
            "sync_id": f"obs-bulk{i:012d}",
            "session_id": "s-bulk",
            "type": "manual",
            "title": f"Bulk memory {i}",
            "content": f"Body of bulk memory number {i}",
            "project": project,
            "scope": "project",
            "created_at": f"2026-01-01 {i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
        }
        for i in range(1, count + 1)
    ]
    store.import_data({"version": "0.1.0", "sessions": sessions, "observations": observations})


def make_app(data_dir: Path, *, busy_timeout_ms: int = 10_000, **kwargs) -> EngramApp:
    config = Config(data_dir=data_dir, busy_timeout_ms=busy_timeout_ms)
    return EngramApp(Gateway(config), **kwargs)


_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "readers-too":
    # Exclusive locking mode: even readers of this WAL database must wait.
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the test closes our stdin
conn.execute("ROLLBACK")
"""


@contextmanager
def database_locked(db_path: Path, *, readers_too: bool = False) -> Iterator[subprocess.Popen]:
    """Another process holds an exclusive lock on ``db_path`` for the duration."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db_path), "readers-too" if readers_too else "writers"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        release(holder)


def release(holder: subprocess.Popen) -> None:
    if holder.poll() is None:
        assert holder.stdin is not None
        holder.stdin.close()
        try:
            holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def _render(app: App) -> Console:
    """Print the current composition (dialogs included) on a console of the app's size."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        record=True,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        safe_box=False,
    )
    # The same composition export_screenshot() renders and the driver writes to the terminal.
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console


def screen_text(app: App) -> str:
    """The characters on screen, as the terminal would show them (dialogs included)."""
    return _render(app).export_text(styles=False)


def terminal_bytes(app: App) -> str:
    """Everything a full redraw of the screen sends to the terminal, control sequences and
    all: what a terminal would obey."""
    console = _render(app)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


async def wait_for(
    pilot: Pilot, condition: Callable[[], object], what: str = "", timeout: float = 10.0
) -> None:
    """Let the app run until ``condition()`` is true (its workers are real threads)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if condition():
            await pilot.pause()
            return
    raise AssertionError(
        f"timed out waiting for {what or condition}; screen:\n{screen_text(pilot.app)}"
    )


_FRAME = str.maketrans("", "", "│▌▐╭╮╰╯─┃━")


def flat(text: str) -> str:
    """Screen text with frames removed and whitespace collapsed: wrapped lines read on."""
    return " ".join(text.translate(_FRAME).split())


def on_screen(app: App, text: str) -> bool:
    """``text`` is on screen, on one line or wrapped over several."""
    shown = screen_text(app)
    return text in shown or " ".join(text.split()) in flat(shown)


async def wait_text(pilot: Pilot, text: str, timeout: float = 10.0) -> str:
    await wait_for(pilot, lambda: on_screen(pilot.app, text), repr(text), timeout)
    return screen_text(pilot.app)


def snapshot(app: App, name: str) -> Path:
    """Keep an SVG of the current screen as a test artifact (``test-artifacts/tui/NAME.svg``)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return Path(app.save_screenshot(f"{name}.svg", str(ARTIFACTS)))

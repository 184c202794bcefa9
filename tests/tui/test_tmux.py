"""End to end: the real ``engram tui`` process in a real terminal (tmux), driven by keystrokes
(send-keys) and read back from the screen (capture-pane), against a seeded store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.support import REPO, engram_env, wait_until
from tests.tui.helpers import Seeded

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One private tmux server (its own socket) running one session of a fixed size."""

    def __init__(self, name: str) -> None:
        self.socket = name
        self.session = name

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-u", "-L", self.socket, "-f", os.devnull, *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
        )

    def start(self, command: list[str], env: dict[str, str], width: int, height: int) -> None:
        exports = [f"{k}={v}" for k, v in env.items()]
        self.run(
            "new-session",
            "-d",
            "-s",
            self.session,
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(REPO),
            "env",
            "-i",
            *exports,
            *command,
        )
        # Textual reads Esc as "back" only after tmux's own escape-sequence delay: keep it short.
        self.run("set-option", "-s", "escape-time", "10")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.session, "-l", text)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session).stdout

    def wait_for(self, *texts: str, timeout: float = 20.0) -> str:
        """The pane once it shows all of ``texts``."""

        def shown() -> str | None:
            screen = self.screen()
            return screen if all(text in screen for text in texts) else None

        try:
            found: str = wait_until(shown, timeout, every=0.1)
        except AssertionError:
            raise AssertionError(
                f"{texts!r} never appeared; the pane shows:\n{self.screen()}"
            ) from None
        return found

    def alive(self) -> bool:
        return self.run("has-session", "-t", self.session, check=False).returncode == 0

    def kill(self) -> None:
        self.run("kill-server", check=False)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    session = Tmux(f"engram-tui-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield session
    finally:
        session.kill()


def test_engram_tui_in_a_real_terminal(seeded: Seeded, tmux: Tmux) -> None:
    # A clean environment: only what a user's shell would have, plus the seeded store.
    env = {
        k: v
        for k, v in engram_env(seeded.data_dir, {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}).items()
        if k in ("PATH", "HOME", "LANG", "LC_ALL", "TERM") or k.startswith("ENGRAM_")
    }
    env["TERM"] = "tmux-256color"
    tmux.start([sys.executable, "-m", "engram", "tui"], env, 110, 34)
    screen = tmux.wait_for("Fixed login timeout")  # the dashboard's recent activity
    assert "Observations" in screen and "Recent activity" in screen

    tmux.keys("s")
    tmux.type("login timeout")  # right away: the search box has the focus as soon as it opens
    tmux.wait_for("Engram › Search", "Results for “login timeout”", "#1 bugfix Fixed login timeout")

    tmux.keys("Enter", "Enter")  # to the results, then open the first: typed ahead, in one go
    screen = tmux.wait_for("Users on slow VPNs")
    for label in ("What", "Why", "Where", "Learned"):
        assert f" {label} " in screen

    tmux.keys("t")
    screen = tmux.wait_for("◆ this memory")
    assert "Chose PostgreSQL for the cloud server" in screen

    tmux.keys("Escape")
    screen = tmux.wait_for("Users on slow VPNs")
    assert "◆ this memory" not in screen
    tmux.keys("Escape")
    tmux.wait_for("Engram › Search", "Results for “login timeout”")
    tmux.keys("Escape")
    tmux.wait_for("Recent activity")
    tmux.keys("q")
    wait_until(lambda: not tmux.alive(), timeout=15, every=0.1)  # the program, and its session, end


def test_edit_a_memorys_content_in_the_users_editor(seeded: Seeded, tmux: Tmux, tmp_path) -> None:
    """Issue 17 item 12: E hands the terminal to $EDITOR on the memory's content; what the
    editor saves comes back into the edit dialog, and saving keeps the old text as a version."""
    editor = tmp_path / "editor.sh"  # an "editor" that appends a line and exits
    editor.write_text('#!/bin/sh\nprintf "\\nEdited in the editor.\\n" >> "$1"\n')
    editor.chmod(0o755)
    env = {
        k: v
        for k, v in engram_env(seeded.data_dir, {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}).items()
        if k in ("PATH", "HOME", "LANG", "LC_ALL") or k.startswith("ENGRAM_")
    }
    env.update(TERM="tmux-256color", EDITOR=str(editor))
    tmux.start([sys.executable, "-m", "engram", "tui"], env, 110, 40)
    tmux.wait_for("Recent activity")
    tmux.keys("s")
    tmux.type("HttpOnly")
    tmux.wait_for("Results for “HttpOnly”", "#3 pattern Session cookie must be HttpOnly")
    tmux.keys("Down", "Enter")  # to the results, open the first
    tmux.wait_for("Engram › Memory", "SameSite=Lax on the session cookie")
    tmux.keys("E")  # the editor runs at once, then the dialog shows its text
    tmux.wait_for("Edited in the editor.", "Edit #")
    tmux.keys("C-s")
    tmux.wait_for("Save these changes")
    tmux.keys("y")
    tmux.wait_for("revisions 2")
    oid = seeded.ids["cookie"]
    saved = seeded.store.get_observation(oid)
    assert saved.content.endswith("session cookie.\nEdited in the editor.")
    assert seeded.store.history(oid).revisions[0].content.endswith("session cookie.")

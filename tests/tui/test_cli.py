"""``engram tui`` as a command: its arguments, and its refusals without a terminal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engram.errors import ValidationError
from engram.tui.styles import DEFAULT_THEME, THEME_ENV, choose_theme
from tests.support import REPO, run_engram


def test_without_a_terminal_it_says_so(data_dir) -> None:
    done = run_engram("tui", data_dir=data_dir)
    assert done.returncode == 1
    assert "engram: error: engram tui needs an interactive terminal" in done.stderr
    assert not (data_dir / "engram.db").exists()  # refused before touching the store


def test_an_unknown_theme_is_refused_with_the_choices(data_dir) -> None:
    done = run_engram("tui", "--theme", "neon", data_dir=data_dir)
    assert done.returncode == 1
    assert "unknown theme 'neon'" in done.stderr and "engram-light" in done.stderr


def test_theme_choice_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THEME_ENV, raising=False)
    assert choose_theme(None) == DEFAULT_THEME
    monkeypatch.setenv(THEME_ENV, "engram-light")
    assert choose_theme(None) == "engram-light"
    assert choose_theme("nord") == "nord"
    monkeypatch.setenv(THEME_ENV, "bogus")
    with pytest.raises(ValidationError, match="unknown theme 'bogus'"):
        choose_theme(None)


def test_help_lists_tui_and_the_cli_does_not_import_textual() -> None:
    code = (
        "import sys; from engram.cli.main import build_parser; build_parser(); "
        "print('textual' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
    helped = subprocess.run(
        [sys.executable, "-m", "engram", "tui", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--project" in helped.stdout and "--theme" in helped.stdout
